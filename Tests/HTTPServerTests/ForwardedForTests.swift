@testable import HTTPServer
import Testing

/// The client's address from `X-Forwarded-For` and `Forwarded`: read right to left past
/// trusted proxies, never the client-written left part, malformed hops ignored.
@Suite struct ForwardedForTests {
    static let proxies = try! TrustedProxies("127.0.0.1, 10.0.0.0/8, 2001:db8:1::/48")

    static func verdict(_ fields: [(String, String)]) -> ForwardedFor.Verdict {
        var headers = HTTPHeaders()
        for (name, value) in fields { headers.add(name, value) }
        return ForwardedFor.client(headers, trusted: proxies)
    }

    /// The first address from the right that is not a trusted proxy is the client; what is
    /// left of it (a client's forgery) is never read, even when it is garbage.
    @Test func walksFromTheRight() {
        #expect(Self.verdict([("X-Forwarded-For", "198.51.100.7")]) == .client("198.51.100.7"))
        #expect(Self.verdict([("X-Forwarded-For", "203.0.113.9, 198.51.100.7, 10.1.2.3")]) == .client("198.51.100.7"))
        #expect(Self.verdict([("X-Forwarded-For", "garbage;;, 198.51.100.7")]) == .client("198.51.100.7"))
        #expect(Self.verdict([("x-forwarded-for", "1.1.1.1"), ("X-Forwarded-For", "198.51.100.7, 127.0.0.1")])
            == .client("198.51.100.7"), "header lines join in order")
        #expect(Self.verdict([("X-Forwarded-For", "10.0.0.5, 127.0.0.1")]) == .client("10.0.0.5"), "all trusted: the leftmost")
        #expect(Self.verdict([("X-Forwarded-For", "198.51.100.7,, ,127.0.0.1")]) == .client("198.51.100.7"), "empty elements skip")
        #expect(Self.verdict([]) == .absent)
    }

    /// Ports, brackets and IPv6 in X-Forwarded-For; addresses come out canonical.
    @Test func forwardedForForms() {
        #expect(Self.verdict([("X-Forwarded-For", "198.51.100.7:4711")]) == .client("198.51.100.7"))
        #expect(Self.verdict([("X-Forwarded-For", "2001:DB8::0:1")]) == .client("2001:db8::1"))
        #expect(Self.verdict([("X-Forwarded-For", "[2001:db8::1]:443")]) == .client("2001:db8::1"))
        #expect(Self.verdict([("X-Forwarded-For", "::ffff:198.51.100.7")]) == .client("198.51.100.7"), "mapped IPv4")
        #expect(Self.verdict([("X-Forwarded-For", "198.51.100.7, 2001:db8:1::9")]) == .client("198.51.100.7"),
                "an IPv6 proxy in a trusted block is skipped")
        #expect(Self.verdict([("X-Forwarded-For", "unknown")]) == .client("unknown"))
        for bad in ["not-an-address", "198.51.100.7:99999", "198.51.100", "[198.51.100.7]", "2001:db8::1:80x", "1.2.3.4 5.6.7.8",
                    "[2001:db8::1", "01.2.3.4"] {
            #expect(Self.verdict([("X-Forwarded-For", bad + ", 127.0.0.1")]) == .ignored, "\(bad)")
        }
    }

    /// RFC 7239: quoting, IPv6 in brackets, ports, obfuscated identifiers, several pairs.
    @Test func forwardedHeader() {
        #expect(Self.verdict([("Forwarded", "for=198.51.100.7")]) == .client("198.51.100.7"))
        #expect(Self.verdict([("Forwarded", #"for="[2001:db8:cafe::17]:4711""#)]) == .client("2001:db8:cafe::17"))
        #expect(Self.verdict([("Forwarded", #"for=198.51.100.7;proto=https;by=203.0.113.43, For="10.0.0.1:80""#)])
            == .client("198.51.100.7"))
        #expect(Self.verdict([("Forwarded", "for=_hidden, for=127.0.0.1")]) == .client("_hidden"))
        #expect(Self.verdict([("Forwarded", #"for="_gazonk:_port""#)]) == .client("_gazonk"))
        #expect(Self.verdict([("Forwarded", "for=unknown")]) == .client("unknown"))
        #expect(Self.verdict([("Forwarded", #"for="198.51.100.7", for="\1\0.0.0.1""#)]) == .client("198.51.100.7"),
                "quoted pairs unescape")
        for bad in [#"for="198.51.100.7"#, "for=[2001:db8::1]", "for=2001:db8::1", "for", "for=", "by=1.2.3.4",
                    "for=1.2.3.4;for=5.6.7.8", "for=1.2.3.4;", #"for="[2001:db8::1]:x""#, "for=_", "for=1.2.3.4 x"] {
            #expect(Self.verdict([("Forwarded", bad)]) == .ignored, "\(bad)")
        }
    }

    /// Both headers: believed only when they name the same client.
    @Test func bothHeadersMustAgree() {
        #expect(Self.verdict([("X-Forwarded-For", "198.51.100.7"), ("Forwarded", "for=198.51.100.7")]) == .client("198.51.100.7"))
        #expect(Self.verdict([("X-Forwarded-For", "198.51.100.7"), ("Forwarded", "for=203.0.113.1")]) == .ignored)
        #expect(Self.verdict([("X-Forwarded-For", "198.51.100.7"), ("Forwarded", "junk")]) == .ignored)
    }

    /// A chain longer than any real one is not walked to its end.
    @Test func longChainsStop() {
        let chain = Array(repeating: "10.0.0.1", count: ForwardedFor.maximumHops + 1).joined(separator: ", ")
        #expect(Self.verdict([("X-Forwarded-For", chain)]) == .ignored)
        #expect(Self.verdict([("X-Forwarded-For", "198.51.100.7, " + chain)]) == .ignored)
    }

    /// TRUSTED_PROXIES takes IPv4 and IPv6 addresses and blocks, and nothing else.
    @Test func trustedProxiesOfBothFamilies() throws {
        let list = try TrustedProxies("2001:db8::/32, ::1, 192.0.2.0/24")
        #expect(list.contains(IPAddress("2001:db8:ffff::1")!))
        #expect(!list.contains(IPAddress("2001:db9::1")!))
        #expect(list.contains(IPAddress("::1")!) && !list.contains(IPAddress("::2")!))
        #expect(list.contains(IPAddress("::ffff:192.0.2.9")!), "a mapped IPv4 address matches its IPv4 block")
        #expect(try TrustedProxies("::/0").contains(IPAddress("2001:db8::1")!))
        for bad in ["2001:db8::/129", "2001:db8::/", "[::1]", "::1/-1", "fe80::1%eth0", "2001:db8::/0x1"] {
            #expect(throws: TrustedProxies.Invalid.self, "\(bad)") { try TrustedProxies(bad) }
        }
    }
}
