import Glibc

/// The PROXY protocol header a load balancer puts before a connection's first byte to say
/// who the client is (HAProxy's proxy-protocol.txt, versions 1 and 2): a pure decoder of the
/// bytes received so far, fuzzed like every decoder of peer bytes.
///
/// Strict: a version 1 line must be exactly `PROXY TCP4|TCP6 <source> <destination>
/// <source port> <destination port>\r\n` (or `PROXY UNKNOWN...\r\n`) within 107 bytes, with
/// addresses of the named family and ports 0 to 65535; a version 2 header must carry version
/// 2, the command LOCAL or PROXY, a known family, and an address block long enough for it.
public enum ProxyHeader {
    /// What the bytes received so far are.
    public enum Parsed: Equatable, Sendable {
        /// A prefix of a PROXY header (or nothing yet): read more.
        case needMore
        /// Not a PROXY header: the bytes are the protocol itself (HTTP).
        case notProxy
        /// A complete header of `length` bytes; `source` is the client's address as text,
        /// nil when the header names none (LOCAL, UNKNOWN, UNSPEC: the connection's own peer).
        case header(source: String?, length: Int)
        /// A PROXY header that breaks the protocol.
        case invalid
    }

    /// The longest version 1 header, CRLF included.
    public static let maximumV1Length = 107
    /// The longest version 2 header accepted (16 bytes and an address block with TLVs).
    public static let maximumV2Length = 16 + 512
    /// Version 2's 12-byte signature.
    static let v2Signature: [UInt8] = [0x0D, 0x0A, 0x0D, 0x0A, 0x00, 0x0D, 0x0A, 0x51, 0x55, 0x49, 0x54, 0x0A]
    static let v1Prefix = Array("PROXY ".utf8)

    /// Decodes the start of a connection's bytes.
    public static func parse(_ bytes: [UInt8]) -> Parsed {
        if startsWith(bytes, v2Signature) { return v2(bytes) }
        if startsWith(bytes, v1Prefix) { return v1(bytes) }
        let mayBecomeOne = bytes.count < v2Signature.count
            && (v2Signature.starts(with: bytes) || v1Prefix.starts(with: bytes))
        return mayBecomeOne ? .needMore : .notProxy
    }

    private static func startsWith(_ bytes: [UInt8], _ prefix: [UInt8]) -> Bool {
        bytes.count >= prefix.count && bytes.starts(with: prefix)
    }

    // MARK: Version 1

    private static func v1(_ bytes: [UInt8]) -> Parsed {
        let window = bytes.prefix(maximumV1Length)
        if let lf = window.firstIndex(of: 0x0A), lf == 0 || bytes[lf - 1] != 0x0D { return .invalid }  // a bare LF
        guard let cr = window.firstIndex(of: 0x0D) else {
            return bytes.count >= maximumV1Length ? .invalid : .needMore
        }
        guard cr + 1 < bytes.count else { return cr + 1 < maximumV1Length ? .needMore : .invalid }
        guard bytes[cr + 1] == 0x0A, !window[..<cr].contains(0x0A) else { return .invalid }
        let line = bytes[..<cr]
        guard line.allSatisfy({ $0 >= 0x20 && $0 < 0x7F }) else { return .invalid }
        let fields = line.split(separator: 0x20, omittingEmptySubsequences: false).map { String(decoding: $0, as: UTF8.self) }
        if fields.count >= 2, fields[1] == "UNKNOWN" { return .header(source: nil, length: cr + 2) }
        guard fields.count == 6, fields[0] == "PROXY", let family = ["TCP4": AF_INET, "TCP6": AF_INET6][fields[1]],
              let source = canonical(fields[2], family: family), canonical(fields[3], family: family) != nil,
              isPort(fields[4]), isPort(fields[5]) else { return .invalid }
        return .header(source: source, length: cr + 2)
    }

    private static func isPort(_ text: String) -> Bool {
        guard (1...5).contains(text.utf8.count), text.utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }),
              text == "0" || text.utf8.first != 0x30, let value = Int(text) else { return false }
        return value <= 65535
    }

    /// The address in its canonical text, nil unless `text` is one of `family` (inet_pton
    /// is strict: four decimal octets for IPv4, RFC 4291 text for IPv6).
    private static func canonical(_ text: String, family: Int32) -> String? {
        guard !text.isEmpty, text.utf8.count <= 45 else { return nil }
        var address = [UInt8](repeating: 0, count: 16)
        guard inet_pton(family, text, &address) == 1 else { return nil }
        return format(Array(address.prefix(family == AF_INET ? 4 : 16)))
    }

    // MARK: Version 2

    private static func v2(_ bytes: [UInt8]) -> Parsed {
        guard bytes.count >= 16 else { return .needMore }
        let versionCommand = bytes[12], familyProtocol = bytes[13]
        let length = 16 + (Int(bytes[14]) << 8 | Int(bytes[15]))
        guard versionCommand >> 4 == 2, versionCommand & 0x0F <= 1, familyProtocol >> 4 <= 3, familyProtocol & 0x0F <= 2,
              length <= maximumV2Length else { return .invalid }
        guard bytes.count >= length else { return .needMore }
        let block = bytes[16..<length]
        if versionCommand & 0x0F == 0 { return .header(source: nil, length: length) }  // LOCAL: a health check
        let stream = familyProtocol & 0x0F == 1
        switch familyProtocol >> 4 {
        case 1:
            guard block.count >= 12 else { return .invalid }
            return .header(source: stream ? format(Array(block.prefix(4))) : nil, length: length)
        case 2:
            guard block.count >= 36 else { return .invalid }
            return .header(source: stream ? format(Array(block.prefix(16))) : nil, length: length)
        case 3:
            guard block.count >= 216 else { return .invalid }
            return .header(source: nil, length: length)
        default:
            return .header(source: nil, length: length)
        }
    }

    // MARK: Text

    /// An IPv4 (4 bytes) or IPv6 (16 bytes) address as inet_ntop writes it.
    static func format(_ address: [UInt8]) -> String? {
        var text = [CChar](repeating: 0, count: 64)
        let family = address.count == 4 ? AF_INET : AF_INET6
        guard inet_ntop(family, address, &text, socklen_t(text.count)) != nil else { return nil }
        return String(cString: text)
    }
}
