// libFuzzer entry for what an MCP client sends: JSONRPCMessage.decode (every MCP POST
// body), the progress token in its params, and the Accept header that asks for an event
// stream (the input read as a header value). Any crash, hang or sanitizer report is a bug.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzMCPRequest(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let bytes = Array(UnsafeBufferPointer(start: data, count: size))
    if case .request(_, let method, let params) = JSONRPCMessage.decode(bytes) {
        precondition(!method.isEmpty && method.unicodeScalars.count <= JSONRPCMessage.maximumMethodLength)
        _ = MCPProgressRequest.token(params)
    }
    _ = MCPProgressRequest.acceptsEventStream(String(decoding: bytes, as: UTF8.self))
    return 0
}
