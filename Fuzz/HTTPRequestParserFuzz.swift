// libFuzzer entry for HTTPRequestParser (built by `make fuzz` with swiftc -sanitize=fuzzer
// together with the parser's sources). The first byte picks where the input is split, so
// incremental parsing across reads is exercised too. Any crash, hang or sanitizer report
// is a bug; the parser must answer every input with requests, a wait, or one failure.
@testable import HTTPServer

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzHTTPRequestParser(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let bytes = UnsafeRawBufferPointer(start: data, count: size)
    let split = size > 0 ? Int(bytes[0]) % (size + 1) : 0
    var limits = HTTPServerLimits()
    limits.maxHeaderBytes = 2048
    limits.maxStartLineBytes = 1024
    limits.maxBodyBytes = 4096
    var parser = HTTPRequestParser(limits: limits)
    for part in [UnsafeRawBufferPointer(rebasing: bytes[0..<split]), UnsafeRawBufferPointer(rebasing: bytes[split...])] {
        parser.append(part)
        while let event = parser.next() {
            switch event {
            case .request(let request):
                _ = request.queryItems
                _ = request.isWebSocketUpgrade
                _ = request.keepAlive
            case .expectContinue:
                break
            case .failure:
                return 0
            }
        }
    }
    return 0
}
