// libFuzzer entry for what push services send back: APNs status and JSON error bodies
// (reason, the 410 timestamp), Web Push statuses and Retry-After, and response header
// lines. The first two bytes pick the status. Any crash, hang or sanitizer report is a bug.
@testable import Push

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzPushResponse(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let bytes = Array(UnsafeBufferPointer(start: data, count: size))
    let status: Int? = bytes.count < 2 || bytes[0] == 0 ? nil : Int(bytes[0]) * 4 + Int(bytes[1] % 4)
    let body = Array(bytes.dropFirst(2))
    let text = String(decoding: body, as: UTF8.self)
    let response = PushHTTPResponse(status: status, body: body, headers: ["retry-after": text], httpVersion: 2)
    switch APNsResponse.action(response) {
    case .result(let result): _ = APNsResponse.delivery(response, result: result)
    case .expiredProviderToken, .retry: _ = APNsResponse.delivery(response, result: .error)
    }
    _ = WebPushResponse.delivery(response, WebPushResponse.result(status))
    _ = WebPushResponse.retryAfter(text)
    for line in text.split(separator: "\n") { _ = PushHTTPResponse.headerField(String(line)) }
    return 0
}
