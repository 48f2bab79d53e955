import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// Where a client metadata document may be fetched from: the host's addresses, resolved
/// once and checked, so that the fetch connects to an address that passed (no DNS
/// rebinding between the check and the connect). Loopback, private (RFC 1918, ULA),
/// shared (100.64/10), link-local, multicast, unspecified and reserved addresses are
/// refused — a document URL must never make the relay reach into its own network (SSRF) —
/// unless loopback is allowed (tests serve documents on 127.0.0.1).
enum FetchAddress {
    /// The first address of `host` that may be fetched from, as text, or nil (unknown
    /// host, or every address refused). Blocking: call it off the event loop.
    static func resolve(_ host: String, allowLoopback: Bool) -> String? {
        var hints = addrinfo()
        hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
        var list: UnsafeMutablePointer<addrinfo>?
        guard getaddrinfo(host, nil, &hints, &list) == 0, let first = list else { return nil }
        defer { freeaddrinfo(list) }
        var addresses: [[UInt8]] = []
        var node: UnsafeMutablePointer<addrinfo>? = first
        while let entry = node {
            if let address = entry.pointee.ai_addr {
                switch Int32(address.pointee.sa_family) {
                case AF_INET:
                    address.withMemoryRebound(to: sockaddr_in.self, capacity: 1) {
                        addresses.append(withUnsafeBytes(of: $0.pointee.sin_addr) { Array($0) })
                    }
                case AF_INET6:
                    address.withMemoryRebound(to: sockaddr_in6.self, capacity: 1) {
                        addresses.append(withUnsafeBytes(of: $0.pointee.sin6_addr) { Array($0) })
                    }
                default: break
                }
            }
            node = entry.pointee.ai_next
        }
        // Every address must pass: a host that also resolves inward is refused as a whole.
        guard !addresses.isEmpty, addresses.allSatisfy({ mayFetch($0, allowLoopback: allowLoopback) }) else { return nil }
        return text(addresses[0])
    }

    /// Whether an IPv4 (4 bytes) or IPv6 (16 bytes) address may be fetched from.
    static func mayFetch(_ address: [UInt8], allowLoopback: Bool) -> Bool {
        if address.count == 16 {
            if address[0..<10].allSatisfy({ $0 == 0 }) && address[10] == 0xFF && address[11] == 0xFF {
                return mayFetch(Array(address[12...]), allowLoopback: allowLoopback)  // IPv4-mapped
            }
            if address[0..<15].allSatisfy({ $0 == 0 }) { return address[15] == 1 && allowLoopback }  // :: and ::1
            if address[0] & 0xFE == 0xFC { return false }  // fc00::/7 unique local
            if address[0] == 0xFE && address[1] & 0xC0 == 0x80 { return false }  // fe80::/10 link-local
            if address[0] == 0xFF { return false }  // multicast
            if address[0] == 0x20 && address[1] == 0x01 && address[2] == 0x0D && address[3] == 0xB8 { return false }  // documentation
            if address[0..<12] == [0, 0x64, 0xFF, 0x9B, 0, 0, 0, 0, 0, 0, 0, 0] {  // 64:ff9b::/96 NAT64
                return mayFetch(Array(address[12...]), allowLoopback: allowLoopback)
            }
            return true
        }
        guard address.count == 4 else { return false }
        let a = address[0], b = address[1]
        if a == 127 { return allowLoopback }
        return !(a == 0 || a == 10 || (a == 100 && b & 0xC0 == 64) || (a == 169 && b == 254) || (a == 172 && b & 0xF0 == 16)
                 || (a == 192 && b == 168) || (a == 192 && b == 0 && address[2] == 0) || (a == 198 && b & 0xFE == 18)
                 || a >= 224)
    }

    /// An address as text (`127.0.0.1`, `[::1]` for curl's pinning).
    private static func text(_ address: [UInt8]) -> String {
        var buffer = [CChar](repeating: 0, count: Int(INET6_ADDRSTRLEN))
        let family = address.count == 4 ? AF_INET : AF_INET6
        _ = address.withUnsafeBytes { inet_ntop(family, $0.baseAddress, &buffer, socklen_t(buffer.count)) }
        let text = String(cString: buffer)
        return address.count == 4 ? text : "[\(text)]"
    }
}
