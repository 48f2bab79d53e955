// libFuzzer entry for WebSocketFrameDecoder (built by `make fuzz`). The first byte picks
// the role and the split point. Every input must end in messages, a wait, or one failure.
@testable import HTTPServer

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzWebSocketFrameDecoder(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let bytes = UnsafeRawBufferPointer(start: data, count: size)
    guard size > 0 else { return 0 }
    let role: WebSocketFrameDecoder.Role = bytes[0] & 1 == 0 ? .server : .client
    let split = Int(bytes[0] >> 1) % size + 1
    var decoder = WebSocketFrameDecoder(role: role, maxMessageBytes: 4096)
    for part in [UnsafeRawBufferPointer(rebasing: bytes[1..<split]), UnsafeRawBufferPointer(rebasing: bytes[split...])] {
        decoder.append(part)
        while let event = decoder.next() {
            if case .failure = event { return 0 }
        }
    }
    return 0
}
