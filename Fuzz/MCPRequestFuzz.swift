// libFuzzer entry for what an MCP client sends: JSONRPCMessage.decode (every MCP POST
// body), the revision checks of its headers and `_meta` (MCPRevision: the input's first
// line split into MCP-Protocol-Version, Mcp-Method and Mcp-Name, the rest as the body), the
// progress token in its params, and the Accept header that asks for an event stream (the
// input read as a header value); and what agents send about durable requests
// (docs/protocol.md, "Durable requests"):
// request ids and task ids (RequestToken), a task's ttl, tasks/list cursors, Prefer and
// wait_secs. Any crash, hang or sanitizer report is a bug.
@testable import Relay

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzMCPRequest(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let bytes = Array(UnsafeBufferPointer(start: data, count: size))
    let newline = bytes.firstIndex(of: 0x0A)
    let headerLine = newline.map { String(decoding: bytes[..<$0], as: UTF8.self) }
    let headers = headerLine.map { $0.split(separator: "|", maxSplits: 2, omittingEmptySubsequences: false).map(String.init) } ?? []
    let body = newline.map { Array(bytes[($0 + 1)...]) } ?? bytes
    for candidate in [bytes, body] {
        if case .request(let id, let method, let params) = JSONRPCMessage.decode(candidate) {
            precondition(!method.isEmpty && method.unicodeScalars.count <= JSONRPCMessage.maximumMethodLength)
            _ = MCPProgressRequest.token(params)
            if let task = params["task"] {
                if case .success(let ttl?) = DurableParams.ttl(task) {
                    precondition((DurableParams.minimumTTLMilliseconds...DurableParams.maximumTTLMilliseconds).contains(ttl))
                }
            }
            for key in ["taskId", "cursor"] {
                guard let text = params[key] as? String else { continue }
                if let token = RequestToken(parsing: text) { precondition(token.text == text) }
                if let cursor = DurableParams.parseCursor(text) {
                    precondition(DurableParams.parseCursor(DurableParams.cursor(createdMicroseconds: cursor.createdMicroseconds,
                                                                                 id: cursor.id))?.id == cursor.id)
                }
            }
            let chosen = MCPRevision.choose(method: method, params: params, id: id,
                                            versionHeader: headers.count > 0 ? headers[0] : nil,
                                            methodHeader: headers.count > 1 ? headers[1] : nil,
                                            nameHeader: headers.count > 2 ? headers[2] : nil)
            if case .success(let value) = chosen, case .modern(let version) = value.revision {
                precondition(MCPRevision.modernVersions.contains(version) && headers.first == version)
            }
        }
    }
    if let headerLine {
        _ = MCPRevision.decodedName(headerLine)
        _ = MCPRevision.traceparent(headerLine)
        _ = DurableParams.prefersAsync(headerLine)
        if let wait = DurableParams.waitSeconds(headerLine) { precondition((0...DurableParams.maximumWaitSeconds).contains(wait)) }
        if let token = RequestToken(parsing: headerLine) { precondition(token.text == headerLine) }
    }
    _ = MCPProgressRequest.acceptsEventStream(String(decoding: bytes, as: UTF8.self))
    return 0
}
