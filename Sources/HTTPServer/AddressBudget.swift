/// The keys a per-client budget counts an address under (failed credentials, sockets that
/// never said hello): an IPv4 address (or an IPv4-mapped IPv6 one) as itself, an IPv6
/// address as its /64 — the block one subscriber, host or VM is handed, and which an
/// attacker can fill with as many addresses as they like — written `prefix::/64`, and also
/// as its /56 and /48 (`keys(for:)`), the blocks a site is routed. Text that is not an
/// address stays as it is.
public enum AddressBudget {
    /// The budget key of `address` (an address as the server reports clients).
    public static func key(for address: String) -> String {
        keys(for: address)[0]
    }

    /// The prefix lengths an IPv6 address is also counted under, narrowest first: a site is
    /// routed a /56 or a /48, which holds 256 or 65,536 /64s — each a budget of its own if
    /// only the /64 were counted.
    public static let prefixLengths = [64, 56, 48]

    /// The keys of `address` at every prefix length in `prefixLengths` (`prefix::/56`...), or
    /// the address alone for IPv4 (and text that is not an address).
    public static func keys(for address: String) -> [String] {
        guard let parsed = IPAddress(address), parsed.bytes.count == 16, parsed.ipv4 == nil else { return [address] }
        return prefixLengths.map { length in
            let network = Array(parsed.bytes.prefix(length / 8)) + [UInt8](repeating: 0, count: 16 - length / 8)
            return (ProxyHeader.format(network) ?? address) + "/\(length)"
        }
    }
}
