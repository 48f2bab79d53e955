import Glibc

/// The peers the server believes about who the client is (`TRUSTED_PROXIES`): IPv4 and IPv6
/// addresses and CIDR blocks. A PROXY protocol header from any other peer is refused (400
/// and close); a trusted peer may also connect without one (a health check), and is then
/// the client. `X-Forwarded-For` and `Forwarded` are read only on requests from a trusted
/// peer (`ForwardedFor`), and each hop they name is believed only while the hop to its
/// right is trusted.
public struct TrustedProxies: Sendable, Equatable {
    /// A refused entry of the list.
    public struct Invalid: Error, Equatable, CustomStringConvertible {
        /// The entry as given.
        public let entry: String
        public var description: String { "not an IPv4 or IPv6 address or CIDR block: \(entry)" }
    }

    private struct Block4: Sendable, Equatable {
        let network: UInt32
        let mask: UInt32
    }

    private struct Block6: Sendable, Equatable {
        let network: [UInt8]
        let bits: Int
    }

    private let blocks4: [Block4]
    private let blocks6: [Block6]

    /// Nobody: every PROXY header is refused and forwarding headers are ignored.
    public static let none = TrustedProxies(blocks4: [], blocks6: [])

    private init(blocks4: [Block4], blocks6: [Block6]) {
        self.blocks4 = blocks4
        self.blocks6 = blocks6
    }

    /// Parses a comma-separated list such as `10.0.0.0/8, 127.0.0.1, 2001:db8::/32`.
    public init(_ list: String) throws(Invalid) {
        var blocks4: [Block4] = []
        var blocks6: [Block6] = []
        for raw in list.split(separator: ",") {
            let entry = raw.trimmingSpaces()
            guard !entry.isEmpty else { continue }
            let parts = entry.split(separator: "/", omittingEmptySubsequences: false)
            guard parts.count <= 2, let address = IPAddress(String(parts[0])) else { throw Invalid(entry: String(entry)) }
            var bits = address.bytes.count * 8
            if parts.count == 2 {
                guard parts[1].utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }), (1...3).contains(parts[1].utf8.count),
                      let value = Int(parts[1]), value <= bits else { throw Invalid(entry: String(entry)) }
                bits = value
            }
            if address.bytes.count == 4 {
                let mask: UInt32 = bits == 0 ? 0 : ~UInt32(0) << (32 - bits)
                blocks4.append(Block4(network: address.ipv4! & mask, mask: mask))
            } else {
                blocks6.append(Block6(network: Self.masked(address.bytes, bits: bits), bits: bits))
            }
        }
        self.blocks4 = blocks4
        self.blocks6 = blocks6
    }

    /// Whether nobody is trusted.
    public var isEmpty: Bool { blocks4.isEmpty && blocks6.isEmpty }

    /// Whether a peer's IPv4 address (`sin_addr.s_addr`, network order) is trusted.
    func contains(networkOrder address: UInt32) -> Bool {
        contains(ipv4: UInt32(bigEndian: address))
    }

    /// Whether `address` is trusted (an IPv4-mapped IPv6 address counts as its IPv4 one).
    func contains(_ address: IPAddress) -> Bool {
        if let ipv4 = address.ipv4 { return contains(ipv4: ipv4) }
        return blocks6.contains { Self.masked(address.bytes, bits: $0.bits) == $0.network }
    }

    private func contains(ipv4 host: UInt32) -> Bool {
        blocks4.contains { host & $0.mask == $0.network }
    }

    private static func masked(_ bytes: [UInt8], bits: Int) -> [UInt8] {
        bytes.enumerated().map { index, byte in
            let keep = min(8, max(0, bits - index * 8))
            return keep == 8 ? byte : byte & ~(UInt8(0xFF) >> keep)
        }
    }
}

/// An IPv4 or IPv6 address as bytes, parsed strictly (inet_pton) and written canonically
/// (inet_ntop): the key per-client limits count under, so that one address has one text.
struct IPAddress: Sendable, Equatable {
    /// 4 bytes (IPv4) or 16 (IPv6), network order.
    let bytes: [UInt8]

    /// Parses dotted-quad IPv4 or RFC 4291 IPv6 text (no brackets, port or zone); nil for
    /// anything else.
    init?(_ text: some StringProtocol) {
        guard !text.isEmpty, text.utf8.count <= 45,
              text.utf8.allSatisfy({ ($0 >= 0x30 && $0 <= 0x3A) || $0 == 0x2E || ($0 | 0x20 >= 0x61 && $0 | 0x20 <= 0x66) })
        else { return nil }
        var buffer = [UInt8](repeating: 0, count: 16)
        let string = String(text)
        if inet_pton(AF_INET, string, &buffer) == 1 {
            bytes = Array(buffer.prefix(4))
        } else if inet_pton(AF_INET6, string, &buffer) == 1 {
            bytes = buffer
        } else {
            return nil
        }
    }

    /// The IPv4 address in host order, for an IPv4 address or an IPv4-mapped IPv6 one.
    var ipv4: UInt32? {
        let tail: ArraySlice<UInt8>
        if bytes.count == 4 {
            tail = bytes[0..<4]
        } else if bytes.prefix(10).allSatisfy({ $0 == 0 }), bytes[10] == 0xFF, bytes[11] == 0xFF {
            tail = bytes[12..<16]
        } else {
            return nil
        }
        return tail.reduce(UInt32(0)) { $0 << 8 | UInt32($1) }
    }

    /// The canonical text (an IPv4-mapped IPv6 address as its IPv4 text).
    var text: String {
        if bytes.count == 16, let ipv4 {
            return "\(ipv4 >> 24).\(ipv4 >> 16 & 0xFF).\(ipv4 >> 8 & 0xFF).\(ipv4 & 0xFF)"
        }
        return ProxyHeader.format(bytes) ?? ""
    }
}
