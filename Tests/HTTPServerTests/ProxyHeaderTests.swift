import Foundation
@testable import HTTPServer
import Testing

/// The PROXY protocol (v1 and v2): the decoder's verdicts byte by byte, and the server
/// believing a header only from `TRUSTED_PROXIES`.
@Suite struct ProxyHeaderTests {
    static func v2(command: UInt8 = 0x21, family: UInt8 = 0x11, block: [UInt8]) -> [UInt8] {
        ProxyHeader.v2Signature + [command, family, UInt8(block.count >> 8), UInt8(block.count & 0xFF)] + block
    }

    @Test func versionOneLines() {
        let line = Array("PROXY TCP4 203.0.113.7 10.0.0.1 56324 443\r\nGET / HTTP/1.1\r\n".utf8)
        #expect(ProxyHeader.parse(line) == .header(source: "203.0.113.7", length: 43))
        #expect(ProxyHeader.parse(Array("PROXY TCP6 2001:db8::1 ::1 1 2\r\n".utf8)) == .header(source: "2001:db8::1", length: 32))
        #expect(ProxyHeader.parse(Array("PROXY UNKNOWN\r\n".utf8)) == .header(source: nil, length: 15))
        for bad in ["PROXY TCP4 203.0.113.7 10.0.0.1 56324 443\n", "PROXY TCP4 1.2.3 10.0.0.1 1 2\r\n",
                    "PROXY TCP4 ::1 10.0.0.1 1 2\r\n", "PROXY TCP4 1.2.3.4 10.0.0.1 65536 2\r\n",
                    "PROXY TCP4 1.2.3.4 10.0.0.1 01 2\r\n", "PROXY TCP4  1.2.3.4 10.0.0.1 1 2\r\n",
                    "PROXY TCP5 1.2.3.4 10.0.0.1 1 2\r\n", "PROXY TCP4 1.2.3.4 10.0.0.1 1 2 3\r\n",
                    "PROXY TCP4 127.0.0.1%2f 10.0.0.1 1 2\r\n", "PROXY TCP4 1.2.3.4\u{7f} 10.0.0.1 1 2\r\n"] {
            #expect(ProxyHeader.parse(Array(bad.utf8)) == .invalid, "\(bad.debugDescription)")
        }
        #expect(ProxyHeader.parse(Array(("PROXY " + String(repeating: "1", count: 120)).utf8)) == .invalid,
                "no CRLF within 107 bytes")
    }

    @Test func prefixesWaitAndHTTPPasses() {
        for prefix in ["", "P", "PROX", "PROXY TCP4 1.2.", "PROXY TCP4 1.2.3.4 5.6.7.8 1 2\r"] {
            #expect(ProxyHeader.parse(Array(prefix.utf8)) == .needMore, "\(prefix.debugDescription)")
        }
        #expect(ProxyHeader.parse(Array(ProxyHeader.v2Signature.prefix(7))) == .needMore)
        #expect(ProxyHeader.parse(Self.v2(block: [1, 2, 3, 4, 5, 6, 7, 8, 0, 1, 0, 2]).dropLast(3).map { $0 }) == .needMore)
        for http in ["GET / HTTP/1.1\r\n", "POST /v1/locate HTTP/1.1\r\n", "PUT", "\r\n\r\nX"] {
            #expect(ProxyHeader.parse(Array(http.utf8)) == .notProxy, "\(http.debugDescription)")
        }
    }

    @Test func versionTwoHeaders() {
        let inet = Self.v2(block: [203, 0, 113, 7, 10, 0, 0, 1, 0xDC, 0x04, 0x01, 0xBB])
        #expect(ProxyHeader.parse(inet + Array("GET".utf8)) == .header(source: "203.0.113.7", length: 28))
        let inet6 = Self.v2(family: 0x21, block: [0x20, 0x01, 0x0d, 0xb8] + [UInt8](repeating: 0, count: 11) + [1]
                              + [UInt8](repeating: 0, count: 16) + [0, 1, 0, 2])
        #expect(ProxyHeader.parse(inet6) == .header(source: "2001:db8::1", length: 52))
        #expect(ProxyHeader.parse(Self.v2(command: 0x20, family: 0x00, block: [])) == .header(source: nil, length: 16),
                "LOCAL (a health check) names no client")
        #expect(ProxyHeader.parse(Self.v2(block: inet.dropFirst(16) + [0x03, 0x00, 0x04, 1, 2, 3, 4]))
                == .header(source: "203.0.113.7", length: 35), "TLVs after the addresses are skipped")
        #expect(ProxyHeader.parse(Self.v2(command: 0x11, block: [1, 2, 3, 4, 5, 6, 7, 8, 0, 1, 0, 2])) == .invalid, "version 1 in v2")
        #expect(ProxyHeader.parse(Self.v2(command: 0x22, block: [1, 2, 3, 4, 5, 6, 7, 8, 0, 1, 0, 2])) == .invalid, "command 2")
        #expect(ProxyHeader.parse(Self.v2(family: 0x41, block: [1, 2, 3, 4, 5, 6, 7, 8, 0, 1, 0, 2])) == .invalid, "family 4")
        #expect(ProxyHeader.parse(Self.v2(block: [1, 2, 3, 4])) == .invalid, "an address block too short for its family")
        #expect(ProxyHeader.parse(Self.v2(block: [UInt8](repeating: 0, count: 600))) == .invalid, "over the length cap")
    }

    @Test func trustedProxiesParse() throws {
        let list = try TrustedProxies("10.0.0.0/8, 127.0.0.1 ,192.168.1.0/24")
        func order(_ a: UInt8, _ b: UInt8, _ c: UInt8, _ d: UInt8) -> UInt32 {
            UInt32(bigEndian: UInt32(a) << 24 | UInt32(b) << 16 | UInt32(c) << 8 | UInt32(d))
        }
        #expect(list.contains(networkOrder: order(10, 200, 3, 4)))
        #expect(list.contains(networkOrder: order(127, 0, 0, 1)))
        #expect(!list.contains(networkOrder: order(127, 0, 0, 2)))
        #expect(list.contains(networkOrder: order(192, 168, 1, 77)) && !list.contains(networkOrder: order(192, 168, 2, 1)))
        #expect(try TrustedProxies("").isEmpty)
        for bad in ["10.0.0.0/33", "10.0.0/8", "::1/129", "10.0.0.0/", "localhost", "1.2.3.4/8/8"] {
            #expect(throws: TrustedProxies.Invalid.self, "\(bad)") { try TrustedProxies(bad) }
        }
    }

    /// Behind a trusted proxy the handler sees the header's client, also when the header
    /// arrives in pieces; a trusted peer without a header is the client itself.
    @Test func aTrustedProxyNamesTheClient() async throws {
        let server = try TestServer(trustedProxies: TrustedProxies("127.0.0.1"))
        let client = try await RawClient.connect(port: server.port)
        client.send("PROXY TCP4 198.51.100.9 127.0.0.1 4000 80\r")
        // Real time: the two halves must reach the server as two reads.
        try await Task.sleep(for: .milliseconds(50))
        client.send("\nGET /client HTTP/1.1\r\nHost: x\r\n\r\nGET /client HTTP/1.1\r\nHost: x\r\n\r\n")
        let responses = await client.readResponses(2)
        #expect(responses.map(\.body) == ["198.51.100.9", "198.51.100.9"], "the whole connection is the client's")
        let v2 = try await RawClient.connect(port: server.port)
        v2.send(Self.v2(block: [203, 0, 113, 5, 127, 0, 0, 1, 0, 1, 0, 80]) + Array("GET /client HTTP/1.1\r\nHost: x\r\n\r\n".utf8))
        #expect(await v2.readResponses(1).first?.body == "203.0.113.5")
        let plain = try await RawClient.connect(port: server.port)
        plain.send("GET /client HTTP/1.1\r\nHost: x\r\n\r\n")
        #expect(await plain.readResponses(1).first?.body == "127.0.0.1")
        await server.stop()
    }

    /// Behind a balancer that sets X-Forwarded-For (nginx, an ALB) each request of one
    /// connection is its own client's; a PROXY-named source that is itself a trusted proxy
    /// is read on; anyone else's header is ignored, and a malformed one is counted.
    @Test func forwardingHeadersNameEachRequestsClient() async throws {
        let counters = HTTPServerCounters()
        let server = HTTPServer(port: 0, trustedProxies: try TrustedProxies("127.0.0.1, 10.0.0.0/8"), counters: counters) {
            .text(200, $0.remoteAddress)
        }
        let port = try server.start()
        let client = try await RawClient.connect(port: port)
        client.send("GET /client HTTP/1.1\r\nHost: x\r\nX-Forwarded-For: 6.6.6.6, 198.51.100.1\r\n\r\n"
                    + "GET /client HTTP/1.1\r\nHost: x\r\nX-Forwarded-For: 198.51.100.2\r\n\r\n"
                    + "GET /client HTTP/1.1\r\nHost: x\r\nX-Forwarded-For: junk\r\n\r\n"
                    + "GET /client HTTP/1.1\r\nHost: x\r\nForwarded: for=\"[2001:db8::7]:1\"\r\n\r\n")
        #expect(await client.readResponses(4).map(\.body) == ["198.51.100.1", "198.51.100.2", "127.0.0.1", "2001:db8::7"])
        #expect(counters.forwardedHeadersIgnored == 1)
        let proxied = try await RawClient.connect(port: port)
        proxied.send("PROXY TCP4 10.1.1.1 127.0.0.1 4000 80\r\nGET /client HTTP/1.1\r\nHost: x\r\nX-Forwarded-For: 198.51.100.3\r\n\r\n")
        #expect(await proxied.readResponses(1).first?.body == "198.51.100.3", "a trusted PROXY source's header is read")
        let outside = try await RawClient.connect(port: port)
        outside.send("PROXY TCP4 203.0.113.9 127.0.0.1 4000 80\r\nGET /client HTTP/1.1\r\nHost: x\r\nX-Forwarded-For: 198.51.100.4\r\n\r\n")
        #expect(await outside.readResponses(1).first?.body == "203.0.113.9", "an untrusted client's own header is ignored")
        await server.shutdown()
        let untrusting = try TestServer()
        let direct = try await RawClient.connect(port: untrusting.port)
        direct.send("GET /client HTTP/1.1\r\nHost: x\r\nX-Forwarded-For: 198.51.100.5\r\n\r\n")
        #expect(await direct.readResponses(1).first?.body == "127.0.0.1", "without TRUSTED_PROXIES nobody's header counts")
        await untrusting.stop()
    }

    /// Anyone else's PROXY header, and a broken one from a trusted proxy, get 400 and close.
    @Test func anUntrustedOrBrokenHeaderIsRefused() async throws {
        let conformance = ConformanceTests()
        try await conformance.expectRejected("PROXY TCP4 198.51.100.9 127.0.0.1 4000 80\r\nGET /client HTTP/1.1\r\nHost: x\r\n\r\n",
                                             status: 400)
        let server = try TestServer(trustedProxies: TrustedProxies("127.0.0.1"))
        let client = try await RawClient.connect(port: server.port)
        client.send("PROXY TCP4 198.51.100.9 nowhere 4000 80\r\nGET /client HTTP/1.1\r\nHost: x\r\n\r\n")
        let (bytes, closed) = await client.readUntilClose()
        #expect(ParsedResponse.parse(bytes)?.0.status == 400 && closed)
        #expect(server.box.handled.load(ordering: .relaxed) == 0)
        await server.stop()
    }
}

