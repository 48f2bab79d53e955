@testable import HTTPServer
import Testing

/// Per-client budgets count an IPv6 address by its /64 (issue 38, finding 10).
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
}
