// libFuzzer entry for Web Push endpoints a browser phone sends (`push_subscription`): the
// strict parser the allow-list compares. Any crash, hang or sanitizer report is a bug, and so is
// an allowed endpoint whose origin does not start the endpoint (the audience signed for it).
@testable import Push

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzPushEndpoint(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let text = String(decoding: UnsafeBufferPointer(start: data, count: size), as: UTF8.self)
    if let endpoint = PushEndpoint(text) {
        precondition(text.lowercased().hasPrefix(endpoint.origin.lowercased()), "the origin starts the endpoint")
        precondition(!endpoint.host.isEmpty && endpoint.host.utf8.count <= 253)
    }
    return 0
}
