import Glibc

/// The peers whose PROXY protocol header the server believes (`TRUSTED_PROXIES`): IPv4
/// addresses and CIDR blocks. A PROXY header from any other peer is refused (400 and close);
/// a trusted peer may also connect without one (a health check), and is then the client.
public struct TrustedProxies: Sendable, Equatable {
    /// A refused entry of the list.
    public struct Invalid: Error, Equatable, CustomStringConvertible {
        /// The entry as given.
        public let entry: String
        public var description: String { "not an IPv4 address or CIDR block: \(entry)" }
    }

    private struct Block: Sendable, Equatable {
        let network: UInt32
        let mask: UInt32
    }

    private let blocks: [Block]

    /// Nobody: every PROXY header is refused.
    public static let none = TrustedProxies(blocks: [])

    private init(blocks: [Block]) { self.blocks = blocks }

    /// Parses a comma-separated list such as `10.0.0.0/8, 127.0.0.1`.
    public init(_ list: String) throws(Invalid) {
        var blocks: [Block] = []
        for raw in list.split(separator: ",") {
            let entry = raw.trimmedOfBlanks()
            guard !entry.isEmpty else { continue }
            let parts = entry.split(separator: "/", omittingEmptySubsequences: false)
            var address = in_addr()
            guard parts.count <= 2, inet_pton(AF_INET, String(parts[0]), &address) == 1 else { throw Invalid(entry: entry) }
            var bits = 32
            if parts.count == 2 {
                guard let value = Int(parts[1]), (0...32).contains(value), parts[1].allSatisfy(\.isASCII) else {
                    throw Invalid(entry: entry)
                }
                bits = value
            }
            let mask: UInt32 = bits == 0 ? 0 : ~UInt32(0) << (32 - bits)
            blocks.append(Block(network: UInt32(bigEndian: address.s_addr) & mask, mask: mask))
        }
        self.blocks = blocks
    }

    /// Whether nobody is trusted.
    public var isEmpty: Bool { blocks.isEmpty }

    /// Whether a peer's address (`sin_addr.s_addr`, network order) is trusted.
    func contains(networkOrder address: UInt32) -> Bool {
        let host = UInt32(bigEndian: address)
        return blocks.contains { host & $0.mask == $0.network }
    }
}

extension StringProtocol {
    fileprivate func trimmedOfBlanks() -> String {
        var text = Substring(self)
        while let first = text.first, first == " " || first == "\t" { text.removeFirst() }
        while let last = text.last, last == " " || last == "\t" { text.removeLast() }
        return String(text)
    }
}
