/// A strict, incremental HTTP/1.1 request parser: bytes in, requests out. No I/O, so it
/// is tested directly and fuzzed.
///
/// Refused (and the connection closed by the caller): bare LF or CR, obs-fold, space
/// before a header colon, invalid token characters, missing or repeated Host on HTTP/1.1,
/// repeated or non-decimal Content-Length (including a sign), any Transfer-Encoding (411),
/// an unknown version, and anything over the limits (start line 400, head 431, body 413).
public struct HTTPRequestParser: Sendable {
    /// What the parser found.
    public enum Event: Sendable {
        /// A complete request.
        case request(HTTPRequest)
        /// The head asked for `Expect: 100-continue` and its body has not all arrived:
        /// send `100 Continue` now.
        case expectContinue
        /// The input is not acceptable: answer with this status and close.
        case failure(status: Int)
    }

    private enum State {
        case head
        case body(method: String, target: String, version: HTTPVersion, headers: HTTPHeaders, length: Int)
        case failed
    }

    /// The four limits the parser needs, kept small (a parser lives in every connection).
    private struct Bounds: Sendable {
        let startLine: Int32, head: Int32, headerCount: Int32, body: Int32
    }

    private let limits: Bounds
    private var buffer: [UInt8] = []
    private var start = 0
    private var state = State.head

    /// Creates a parser enforcing `limits`.
    public init(limits: HTTPServerLimits = HTTPServerLimits()) {
        self.limits = Bounds(startLine: Int32(clamping: limits.maxStartLineBytes), head: Int32(clamping: limits.maxHeaderBytes),
                             headerCount: Int32(clamping: limits.maxHeaderCount), body: Int32(clamping: limits.maxBodyBytes))
    }

    /// Bytes received but not yet consumed by a request.
    public var bufferedBytes: Int { buffer.count - start }

    /// Whether a request has started arriving (for the header-read timeout).
    public var isMidRequest: Bool {
        switch state {
        case .head: bufferedBytes > 0
        case .body: true
        case .failed: false
        }
    }

    /// Adds received bytes.
    public mutating func append(_ bytes: UnsafeRawBufferPointer) {
        if start > 0 && start == buffer.count {
            buffer.removeAll(keepingCapacity: buffer.capacity <= 4096)
            start = 0
        }
        buffer.append(contentsOf: bytes)
    }

    /// Adds received bytes.
    public mutating func append(_ bytes: [UInt8]) {
        bytes.withUnsafeBytes { append($0) }
    }

    /// Hands over whatever is left in the buffer (after a WebSocket upgrade) and empties it.
    public mutating func takeRemainingBytes() -> [UInt8] {
        defer { buffer = []; start = 0 }
        return Array(buffer[start...])
    }

    /// The next event, or nil when more bytes are needed.
    public mutating func next() -> Event? {
        switch state {
        case .failed:
            return nil
        case .head:
            return parseHead()
        case .body(let method, let target, let version, let headers, let length):
            guard bufferedBytes >= length else { return nil }
            let body = Array(buffer[start..<start + length])
            start += length
            compact()
            state = .head
            return .request(HTTPRequest(method: method, target: target, version: version, headers: headers, body: body))
        }
    }

    private mutating func fail(_ status: Int) -> Event {
        state = .failed
        return .failure(status: status)
    }

    private mutating func compact() {
        if start > 64 * 1024 || (start > 0 && start == buffer.count) {
            buffer.removeFirst(start)
            start = 0
        }
    }

    private mutating func parseHead() -> Event? {
        let end = buffer.count
        // Find the end of the head, refusing bare LF / bare CR on the way.
        var index = start
        var lineStart = start
        var lines: [Range<Int>] = []
        var headEnd: Int?
        while index < end {
            let byte = buffer[index]
            if byte == 0x0A { return fail(400) }  // LF not preceded by CR
            if byte == 0x0D {
                guard index + 1 < end else { break }
                guard buffer[index + 1] == 0x0A else { return fail(400) }
                if index == lineStart {
                    if lines.isEmpty { return fail(400) }  // empty line before the request line
                    headEnd = index + 2
                    break
                }
                lines.append(lineStart..<index)
                index += 2
                lineStart = index
                continue
            }
            index += 1
        }
        let scanned = (headEnd ?? end) - start
        if lines.isEmpty && (headEnd == nil ? end - start : lines.first?.count ?? 0) > Int(limits.startLine) {
            return fail(400)
        }
        if let first = lines.first, first.count > Int(limits.startLine) { return fail(400) }
        if scanned > Int(limits.head) { return fail(431) }
        guard let headEnd else { return nil }

        // Request line: method SP target SP version.
        let requestLine = buffer[lines[0]]
        let parts = requestLine.split(separator: 0x20, omittingEmptySubsequences: false)
        guard parts.count == 3, !parts[0].isEmpty, parts[0].allSatisfy(Self.isTokenByte),
              !parts[1].isEmpty, parts[1].allSatisfy(Self.isTargetByte) else { return fail(400) }
        let method = String(decoding: parts[0], as: UTF8.self)
        let target = String(decoding: parts[1], as: UTF8.self)
        guard target.hasPrefix("/") || (method == "OPTIONS" && target == "*") else { return fail(400) }
        let version: HTTPVersion
        switch String(decoding: parts[2], as: UTF8.self) {
        case "HTTP/1.1": version = .http11
        case "HTTP/1.0": version = .http10
        default: return fail(400)
        }

        // Header fields.
        guard lines.count - 1 <= Int(limits.headerCount) else { return fail(431) }
        var headers = HTTPHeaders(capacity: lines.count - 1)
        for line in lines.dropFirst() {
            let field = buffer[line]
            guard let first = field.first, first != 0x20, first != 0x09 else { return fail(400) }  // obs-fold
            guard let colon = field.firstIndex(of: 0x3A), colon > field.startIndex else { return fail(400) }
            let name = field[field.startIndex..<colon]
            guard name.allSatisfy(Self.isTokenByte) else { return fail(400) }  // includes space before colon
            var value = field[(colon + 1)...]
            while let f = value.first, f == 0x20 || f == 0x09 { value = value.dropFirst() }
            while let l = value.last, l == 0x20 || l == 0x09 { value = value.dropLast() }
            guard value.allSatisfy({ $0 == 0x09 || ($0 >= 0x20 && $0 != 0x7F) }) else { return fail(400) }
            headers.add(String(decoding: name, as: UTF8.self), String(decoding: value, as: UTF8.self))
        }

        let hosts = headers.first("Host").count
        if hosts > 1 || (version == .http11 && hosts == 0) { return fail(400) }
        if headers.first("Transfer-Encoding").count > 0 { return fail(411) }
        let lengths = headers.first("Content-Length")
        var length = 0
        if lengths.count > 1 { return fail(400) }
        if let text = lengths.value {
            guard !text.isEmpty, text.utf8.count <= 18, text.utf8.allSatisfy({ $0 >= 48 && $0 <= 57 }),
                  let value = Int(text) else { return fail(400) }
            length = value
        }
        if length > Int(limits.body) { return fail(413) }

        start = headEnd
        if length == 0 {
            compact()
            return .request(HTTPRequest(method: method, target: target, version: version, headers: headers, body: []))
        }
        state = .body(method: method, target: target, version: version, headers: headers, length: length)
        if bufferedBytes < length, version == .http11, headers["Expect"].map({ $0.caseInsensitiveEquals("100-continue") }) == true {
            return .expectContinue
        }
        return next()
    }

    /// tchar of RFC 9110 §5.6.2.
    static func isTokenByte(_ byte: UInt8) -> Bool {
        switch byte {
        case 0x30...0x39, 0x41...0x5A, 0x61...0x7A: true
        case UInt8(ascii: "!"), UInt8(ascii: "#"), UInt8(ascii: "$"), UInt8(ascii: "%"), UInt8(ascii: "&"),
             UInt8(ascii: "'"), UInt8(ascii: "*"), UInt8(ascii: "+"), UInt8(ascii: "-"), UInt8(ascii: "."),
             UInt8(ascii: "^"), UInt8(ascii: "_"), UInt8(ascii: "`"), UInt8(ascii: "|"), UInt8(ascii: "~"): true
        default: false
        }
    }

    /// Visible ASCII, as a request target may contain.
    static func isTargetByte(_ byte: UInt8) -> Bool {
        byte > 0x20 && byte < 0x7F
    }
}
