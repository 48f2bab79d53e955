// libFuzzer entry for query strings (`?timeout_secs=...&person=...`): percent-decoding and
// the relay's checks of `timeout_secs`. Any crash, hang or sanitizer report is a bug.
@testable import HTTPServer

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzQueryString(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let query = String(decoding: UnsafeBufferPointer(start: data, count: size), as: UTF8.self)
    var parser = HTTPRequestParser(limits: HTTPServerLimits())
    let head = Array("GET /v1/locate?\(query.filter { $0 != " " && $0 != "\r" && $0 != "\n" }) HTTP/1.1\r\nHost: x\r\n\r\n".utf8)
    head.withUnsafeBytes { parser.append($0) }
    if case .request(let request)? = parser.next() {
        for item in request.queryItems { _ = item.value?.count }
        if let text = request.queryItem("timeout_secs"), let value = Int(text) { _ = min(value, 120) }
        _ = request.queryItem("person")?.prefix(320)
    }
    return 0
}
