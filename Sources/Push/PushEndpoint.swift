/// A Web Push endpoint parsed once, strictly: `https://` + a DNS host name (letters, digits
/// and hyphens in dot-separated labels) + an optional port + a path of URL characters. No
/// user info, no percent-encoding or IP literal brackets in the host, no fragment, nothing
/// a URL library would read one way and libcurl another (a host such as
/// `127.0.0.1%2f.googleapis.com` is refused here, not left for libcurl to refuse).
public struct PushEndpoint: Sendable, Equatable {
    /// The host, lowercased.
    public let host: String
    /// The port when the endpoint names one.
    public let port: Int?

    /// `https://host[:port]`: what the VAPID audience and the allow-list compare.
    public var origin: String { "https://" + host + (port.map { ":\($0)" } ?? "") }

    /// The longest endpoint accepted (the database's limit).
    public static let maximumLength = 2048

    /// Parses `text`; nil unless it is such an endpoint.
    public init?(_ text: String) {
        let bytes = Array(text.utf8)
        let scheme = Array("https://".utf8)
        guard bytes.count <= Self.maximumLength, bytes.count > scheme.count,
              bytes.prefix(scheme.count).map(Self.lowercased) == scheme else { return nil }
        let rest = bytes[scheme.count...]
        let authorityEnd = rest.firstIndex { $0 == UInt8(ascii: "/") || $0 == UInt8(ascii: "?") } ?? rest.endIndex
        let authority = rest[rest.startIndex..<authorityEnd]
        let colon = authority.firstIndex(of: UInt8(ascii: ":"))
        let hostBytes = authority[authority.startIndex..<(colon ?? authority.endIndex)]
        guard let host = Self.hostName(hostBytes) else { return nil }
        var port: Int?
        if let colon {
            let digits = authority[(colon + 1)...]
            guard (1...5).contains(digits.count), digits.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }), digits.first != 0x30,
                  let value = Int(String(decoding: digits, as: UTF8.self)), value <= 65535 else { return nil }
            port = value
        }
        let path = Array(rest[authorityEnd...])
        guard path.allSatisfy(Self.isPathByte) else { return nil }
        for (index, byte) in path.enumerated() where byte == UInt8(ascii: "%") {
            guard index + 2 < path.count, path[index + 1...index + 2].allSatisfy(Self.isHexDigit) else { return nil }
        }
        self.host = host
        self.port = port
    }

    private static func lowercased(_ byte: UInt8) -> UInt8 {
        byte >= 0x41 && byte <= 0x5A ? byte + 0x20 : byte
    }

    /// A DNS name: 1 to 253 bytes, labels of 1 to 63 letters, digits and inner hyphens.
    private static func hostName(_ bytes: ArraySlice<UInt8>) -> String? {
        guard (1...253).contains(bytes.count) else { return nil }
        for label in bytes.split(separator: UInt8(ascii: "."), omittingEmptySubsequences: false) {
            guard (1...63).contains(label.count), label.first != UInt8(ascii: "-"), label.last != UInt8(ascii: "-"),
                  label.allSatisfy({ isLetterOrDigit($0) || $0 == UInt8(ascii: "-") }) else { return nil }
        }
        return String(decoding: bytes.map(lowercased), as: UTF8.self)
    }

    private static func isLetterOrDigit(_ byte: UInt8) -> Bool {
        (byte >= 0x30 && byte <= 0x39) || (byte >= 0x41 && byte <= 0x5A) || (byte >= 0x61 && byte <= 0x7A)
    }

    private static func isHexDigit(_ byte: UInt8) -> Bool {
        (byte >= 0x30 && byte <= 0x39) || (byte >= 0x41 && byte <= 0x46) || (byte >= 0x61 && byte <= 0x66)
    }

    /// RFC 3986 path and query characters: unreserved, sub-delims, ":", "@", "/", "?" and
    /// percent-encoded bytes (never a fragment, a space or a control character).
    private static func isPathByte(_ byte: UInt8) -> Bool {
        isLetterOrDigit(byte) || "-._~!$&'()*+,;=:@/?%".utf8.contains(byte)
    }
}
