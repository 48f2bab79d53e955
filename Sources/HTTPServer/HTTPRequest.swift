/// One HTTP request as the handler sees it: the body is complete (Content-Length only).
public struct HTTPRequest: Sendable {
    /// The method, as sent (`GET`, `POST`, ...).
    public let method: String
    /// The request target as sent, path and query (`/v1/locate?timeout_secs=5`).
    public let target: String
    /// The HTTP version, `1.1` or `1.0`.
    public let version: HTTPVersion
    /// The header fields.
    public let headers: HTTPHeaders
    /// The body bytes (empty without Content-Length).
    public let body: [UInt8]
    /// The peer's IP address as text (`127.0.0.1`), set by the connection; empty when unknown.
    public internal(set) var remoteAddress: String = ""

    /// The path, without the query.
    public var path: Substring {
        target.firstIndex(of: "?").map { target[..<$0] } ?? Substring(target)
    }

    /// The raw query string after `?`, or nil.
    public var query: Substring? {
        target.firstIndex(of: "?").map { target[target.index(after: $0)...] }
    }

    /// Query items, percent-decoded (`+` is a space); nil values for items without `=`.
    public var queryItems: [(name: String, value: String?)] {
        var items: [(name: String, value: String?)] = []
        scanQuery { name, value in
            items.append((name: percentDecoded(name), value: value.map(percentDecoded)))
            return true
        }
        return items
    }

    /// The first value of query item `name` (nil when absent or without `=`). Only the
    /// value found is decoded, and a name only when it holds an escape: a request's few
    /// lookups make no array of every item.
    public func queryItem(_ name: String) -> String? {
        var found: String?
        scanQuery { rawName, value in
            let escaped = rawName.utf8.contains { $0 == UInt8(ascii: "%") || $0 == UInt8(ascii: "+") }
            guard escaped ? percentDecoded(rawName) == name : rawName == name else { return true }
            found = value.map(percentDecoded)
            return false
        }
        return found
    }

    /// Calls `body` with each non-empty `&`-separated item of the query, undecoded (its name,
    /// and its value when it has `=`), in order, until `body` returns false.
    private func scanQuery(_ body: (Substring, Substring?) -> Bool) {
        guard let query else { return }
        FormFields.scan(query, body)
    }

    /// Whether this is a well-formed WebSocket opening handshake (RFC 6455 §4.2.1).
    public var isWebSocketUpgrade: Bool {
        method == "GET" && version == .http11
            && headers.contains("Upgrade", token: "websocket")
            && headers.contains("Connection", token: "upgrade")
            && headers["Sec-WebSocket-Version"] == "13"
            && headers["Sec-WebSocket-Key"].map(WebSocketAccept.isValidKey) == true
    }

    /// Whether the connection stays open after the response (HTTP/1.1 default unless
    /// `Connection: close`; HTTP/1.0 only with `Connection: keep-alive`).
    public var keepAlive: Bool {
        switch version {
        case .http11: !headers.contains("Connection", token: "close")
        case .http10: headers.contains("Connection", token: "keep-alive")
        }
    }
}

/// The HTTP versions this server speaks.
public enum HTTPVersion: Sendable, Equatable {
    /// HTTP/1.0.
    case http10
    /// HTTP/1.1.
    case http11
}

func percentDecoded(_ text: Substring) -> String {
    let utf8 = text.utf8
    // Most values hold no escape: they are copied as they are, with no buffer in between.
    guard utf8.contains(where: { $0 == UInt8(ascii: "%") || $0 == UInt8(ascii: "+") }) else { return String(text) }
    func hex(_ c: UInt8) -> UInt8? {
        switch c {
        case 48...57: c - 48
        case 65...70: c - 55
        case 97...102: c - 87
        default: nil
        }
    }
    var bytes: [UInt8] = []
    bytes.reserveCapacity(utf8.count)
    var index = utf8.startIndex
    while index < utf8.endIndex {
        let c = utf8[index]
        if c == UInt8(ascii: "+") {
            bytes.append(UInt8(ascii: " "))
        } else if c == UInt8(ascii: "%"), let first = utf8.index(index, offsetBy: 1, limitedBy: utf8.endIndex),
                  let second = utf8.index(index, offsetBy: 2, limitedBy: utf8.endIndex), second < utf8.endIndex,
                  let high = hex(utf8[first]), let low = hex(utf8[second]) {
            bytes.append(high << 4 | low)
            index = second
        } else {
            // A "%" without two hex digits is kept as it is, and so are the bytes after it
            // (as browsers decode: "%zz" stays "%zz"; it once lost them).
            bytes.append(c)
        }
        index = utf8.index(after: index)
    }
    return String(decoding: bytes, as: UTF8.self)
}
