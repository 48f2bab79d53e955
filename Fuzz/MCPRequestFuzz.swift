// libFuzzer entry for JSONRPCMessage.decode (every MCP POST body). Any crash, hang or
// sanitizer report is a bug.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzMCPRequest(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    if case .request(_, let method, _) = JSONRPCMessage.decode(Array(UnsafeBufferPointer(start: data, count: size))) {
        precondition(method.utf8.count <= 256)
    }
    return 0
}
