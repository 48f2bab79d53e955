@testable import HTTPServer
import Testing

/// Per-client budgets count an IPv6 address by its /64, and also by its /56 and /48, the
/// blocks a site is routed (docs/security.md, "Under floods").
@Suite struct AddressBudgetTests {
    @Test func anIPv6AddressCountsAsItsSlash64() {
        #expect(AddressBudget.key(for: "2001:db8:7:7:a:b:c:d") == "2001:db8:7:7::/64")
        #expect(AddressBudget.key(for: "2001:DB8:7:7::1") == AddressBudget.key(for: "2001:db8:7:7:ffff:ffff:ffff:ffff"))
        #expect(AddressBudget.key(for: "2001:db8:7:8::1") != AddressBudget.key(for: "2001:db8:7:7::1"))
        #expect(AddressBudget.key(for: "::1") == "::/64")
    }

    @Test func ipv4AndOtherTextStayAsTheyAre() {
        #expect(AddressBudget.key(for: "198.51.100.7") == "198.51.100.7")
        #expect(AddressBudget.key(for: "::ffff:198.51.100.7") == "::ffff:198.51.100.7", "an IPv4-mapped address is one client")
        #expect(AddressBudget.key(for: "") == "")
        #expect(AddressBudget.key(for: "not an address") == "not an address")
    }

    @Test func anIPv6AddressAlsoCountsAsItsSlash56AndSlash48() {
        #expect(AddressBudget.keys(for: "2001:db8:5600:aa17:1:2:3:4") == ["2001:db8:5600:aa17::/64", "2001:db8:5600:aa00::/56",
                                                                         "2001:db8:5600::/48"])
        #expect(AddressBudget.keys(for: "2001:db8:5600:aa17::1")[1] == AddressBudget.keys(for: "2001:db8:5600:aaff::9")[1],
                "two /64s of one /56 share its key")
        #expect(AddressBudget.keys(for: "2001:db8:5600:ab00::1")[1] != AddressBudget.keys(for: "2001:db8:5600:aa00::1")[1])
        #expect(AddressBudget.keys(for: "2001:db8:5600:ab00::1")[2] == AddressBudget.keys(for: "2001:db8:5600:aa00::1")[2])
        #expect(AddressBudget.keys(for: "198.51.100.7") == ["198.51.100.7"], "IPv4 is one key")
    }
}
