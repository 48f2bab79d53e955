/// The key a per-client budget counts an address under (failed credentials, sockets that
/// never said hello): an IPv4 address (or an IPv4-mapped IPv6 one) as itself, an IPv6
/// address as its /64 — the block one subscriber, host or VM is handed, and which an
/// attacker can fill with as many addresses as they like — written `prefix::/64`. Text
/// that is not an address stays as it is.
public enum AddressBudget {
    /// The budget key of `address` (an address as the server reports clients).
    public static func key(for address: String) -> String {
        guard let parsed = IPAddress(address), parsed.bytes.count == 16, parsed.ipv4 == nil else { return address }
        let network = Array(parsed.bytes.prefix(8)) + [UInt8](repeating: 0, count: 8)
        return (ProxyHeader.format(network) ?? address) + "/64"
    }
}
