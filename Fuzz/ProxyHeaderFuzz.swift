// libFuzzer entry for the PROXY protocol header (v1 and v2) a load balancer sends before a
// connection's first request, checked against every prefix of the input as the bytes would
// arrive. Any crash, hang or sanitizer report is a bug, and so is a verdict that contradicts
// itself: a header longer than the input, or a prefix called HTTP that the whole calls a header.
@testable import HTTPServer

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzProxyHeader(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let bytes = Array(UnsafeBufferPointer(start: data, count: size))
    let whole = ProxyHeader.parse(bytes)
    if case .header(let source, let length) = whole {
        precondition(length <= bytes.count && length >= 15, "a header within the input")
        if let source { precondition(!source.isEmpty && source.utf8.count <= 45, "an address as text") }
    }
    for cut in stride(from: 0, to: min(size, 64), by: 1) {
        if ProxyHeader.parse(Array(bytes[..<cut])) == .notProxy, case .header = whole {
            preconditionFailure("a prefix called HTTP that the whole calls a PROXY header")
        }
    }
    return 0
}
