// libFuzzer entry for query strings (`?timeout_secs=...&person=...`): percent-decoding and
// the relay's checks of `timeout_secs`, and `queryItem` against a look through `queryItems`
// (it decodes only what it finds). Any crash, hang or sanitizer report is a bug.
@testable import HTTPServer

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzQueryString(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let query = String(decoding: UnsafeBufferPointer(start: data, count: size), as: UTF8.self)
    var parser = HTTPRequestParser(limits: HTTPServerLimits())
    let head = Array("GET /v1/locate?\(query.filter { $0 != " " && $0 != "\r" && $0 != "\n" }) HTTP/1.1\r\nHost: x\r\n\r\n".utf8)
    head.withUnsafeBytes { parser.append($0) }
    if case .request(let request)? = parser.next() {
        let items = request.queryItems
        // `queryItem` decodes only what it finds: it must find what a look through every item finds.
        for name in items.prefix(4).map(\.name) + ["timeout_secs", ""] {
            precondition(request.queryItem(name) == (items.first { $0.name == name }?.value ?? nil))
        }
        if let text = request.queryItem("timeout_secs"), let value = Int(text) { _ = min(value, 120) }
        _ = request.queryItem("person")?.prefix(320)
    }
    return 0
}
