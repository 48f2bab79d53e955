import Foundation
import HTTPServer
import Testing
import TestSupport

/// HTTP/1.1 conformance over raw sockets: good requests, keep-alive, pipelining, and every
/// malformed case with its status and close.
@Suite struct ConformanceTests {
    /// Sends `raw`, expects one response with `status`, then a closed connection.
    func expectRejected(_ raw: String, status: Int, sourceLocation: SourceLocation = #_sourceLocation) async throws {
        let server = try TestServer()
        let client = try await RawClient.connect(port: server.port)
        client.send(raw)
        let (bytes, closed) = await client.readUntilClose()
        let response = ParsedResponse.parse(bytes)?.0
        #expect(response?.status == status, sourceLocation: sourceLocation)
        #expect(response?.header("Connection") == "close", sourceLocation: sourceLocation)
        #expect(closed, "the connection must close", sourceLocation: sourceLocation)
        #expect(server.box.handled.load(ordering: .relaxed) == 0, "no handler may run", sourceLocation: sourceLocation)
        await server.stop()
    }

    @Test func simpleGetAndKeepAliveReuse() async throws {
        let server = try TestServer()
        let client = try await RawClient.connect(port: server.port)
        for n in 1...3 {
            client.send("GET /hello?n=\(n) HTTP/1.1\r\nHost: x\r\n\r\n")
            let responses = await client.readResponses(1)
            #expect(responses.first?.status == 200)
            #expect(responses.first?.body == "GET /hello?n=\(n)")
            #expect(responses.first?.header("Connection") == nil)
        }
        await server.stop()
    }

    /// Pipelined requests are answered in order even when the first is the slowest.
    @Test func pipelinedRequestsAreAnsweredInOrder() async throws {
        let server = try TestServer()
        let client = try await RawClient.connect(port: server.port)
        client.send("GET /sleep?ms=300 HTTP/1.1\r\nHost: x\r\n\r\nPOST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhelloGET /third HTTP/1.1\r\nHost: x\r\n\r\n")
        let responses = await client.readResponses(3)
        #expect(responses.map(\.body) == ["slept 300", "hello", "GET /third"])
        await server.stop()
    }

    /// A good request followed by garbage: the good one is answered, then 400 and close.
    @Test func garbageAfterAGoodRequestIsAnsweredAfterIt() async throws {
        let server = try TestServer()
        let client = try await RawClient.connect(port: server.port)
        client.send("GET /ok HTTP/1.1\r\nHost: x\r\n\r\nNOT HTTP AT ALL\r\n\r\n")
        let responses = await client.readResponses(2)
        #expect(responses.map(\.status) == [200, 400])
        #expect(await client.readUntilClose(timeout: 1).closed)
        await server.stop()
    }

    @Test func expectContinueIsAnswered() async throws {
        let server = try TestServer()
        let client = try await RawClient.connect(port: server.port)
        client.send("POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 4\r\nExpect: 100-continue\r\n\r\n")
        let interim = await client.readResponses(1, timeout: 1)
        #expect(interim.first?.status == 100)
        client.send("body")
        #expect(await client.readResponses(1).first?.body == "body")
        await server.stop()
    }

    @Test func connectionCloseAndHTTP10CloseAfterTheResponse() async throws {
        let server = try TestServer()
        for raw in ["GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", "GET / HTTP/1.0\r\n\r\n"] {
            let client = try await RawClient.connect(port: server.port)
            client.send(raw)
            let (bytes, closed) = await client.readUntilClose()
            #expect(ParsedResponse.parse(bytes)?.0.status == 200)
            #expect(closed)
        }
        await server.stop()
    }

    @Test func chunkedBodyIsRefusedWith411() async throws {
        try await expectRejected("POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n", status: 411)
    }

    @Test func duplicateContentLengthIsRefused() async throws {
        try await expectRejected("POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nContent-Length: 5\r\n\r\nhello", status: 400)
    }

    @Test(arguments: ["+5", "-1", "5,5", "0x5", "", "99999999999999999999"])
    func signedOrMalformedContentLengthIsRefused(value: String) async throws {
        try await expectRejected("POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: \(value)\r\n\r\nhello", status: 400)
    }

    @Test func bareLFIsRefused() async throws {
        try await expectRejected("GET / HTTP/1.1\nHost: x\n\n", status: 400)
    }

    @Test func bareCRIsRefused() async throws {
        try await expectRejected("GET / HTTP/1.1\rHost: x\r\n\r\n", status: 400)
    }

    @Test func obsFoldIsRefused() async throws {
        try await expectRejected("GET / HTTP/1.1\r\nHost: x\r\nX-Long: a\r\n  b\r\n\r\n", status: 400)
    }

    @Test func spaceBeforeColonIsRefused() async throws {
        try await expectRejected("GET / HTTP/1.1\r\nHost : x\r\n\r\n", status: 400)
    }

    @Test func missingOrRepeatedHostIsRefused() async throws {
        try await expectRejected("GET / HTTP/1.1\r\n\r\n", status: 400)
        try await expectRejected("GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n", status: 400)
    }

    @Test(arguments: ["HTTP/2.0", "HTTP/1.2", "http/1.1", "HTTP/1", "FOO"])
    func unknownVersionIsRefused(version: String) async throws {
        try await expectRejected("GET / \(version)\r\nHost: x\r\n\r\n", status: 400)
    }

    @Test func malformedRequestLinesAreRefused() async throws {
        try await expectRejected("GET  / HTTP/1.1\r\nHost: x\r\n\r\n", status: 400)
        try await expectRejected("GET noslash HTTP/1.1\r\nHost: x\r\n\r\n", status: 400)
        try await expectRejected("G(T / HTTP/1.1\r\nHost: x\r\n\r\n", status: 400)
    }

    @Test func oversizedStartLineHeadersAndBodyAreRefused() async throws {
        try await expectRejected("GET /\(String(repeating: "a", count: 9000)) HTTP/1.1\r\nHost: x\r\n\r\n", status: 400)
        try await expectRejected("GET / HTTP/1.1\r\nHost: x\r\nX-Big: \(String(repeating: "b", count: 17000))\r\n\r\n", status: 431)
        let many = (0..<101).map { "X-\($0): y\r\n" }.joined()
        try await expectRejected("GET / HTTP/1.1\r\nHost: x\r\n\(many)\r\n", status: 431)
        try await expectRejected("POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 70000\r\n\r\n", status: 413)
    }

    /// A client that hangs up while its handler waits cancels the handler's task.
    @Test func hangUpCancelsTheHandler() async throws {
        let server = try TestServer()
        let client = try await RawClient.connect(port: server.port)
        client.send("GET /sleep?ms=10000 HTTP/1.1\r\nHost: x\r\n\r\n")
        // Hang up only once the handler runs: a request never handled is never cancelled.
        // Explicitly, not by the end of a scope: the hang-up must not wait for the client's
        // last reference (a clean-clone CI run of 240bbdf saw no cancel within 9 s).
        try await eventually("the handler runs") { server.box.handled.load(ordering: .relaxed) == 1 }
        client.hangUp()
        try await eventually("the handler is cancelled", within: .seconds(9)) { server.box.cancelled.load(ordering: .relaxed) == 1 }
        await server.stop()
    }

    /// A head that does not complete within the header-read timeout gets 408 and a close.
    @Test func slowHeadTimesOut() async throws {
        var limits = HTTPServerLimits()
        limits.headerReadTimeout = .milliseconds(500)
        let server = try TestServer(limits: limits)
        let client = try await RawClient.connect(port: server.port)
        client.send("GET / HTTP/1.1\r\nHost: x\r\nX-Slow: ")
        let (bytes, closed) = await client.readUntilClose(timeout: 3)
        #expect(ParsedResponse.parse(bytes)?.0.status == 408)
        #expect(closed)
        await server.stop()
    }

    /// An idle keep-alive connection is closed after the idle timeout.
    @Test func idleConnectionIsClosed() async throws {
        var limits = HTTPServerLimits()
        limits.idleTimeout = .seconds(2)  // long enough for a loaded machine to send the request first
        let server = try TestServer(limits: limits)
        let client = try await RawClient.connect(port: server.port)
        client.send("GET / HTTP/1.1\r\nHost: x\r\n\r\n")
        #expect(await client.readResponses(1).first?.status == 200)
        #expect(await client.readUntilClose(timeout: 8).closed)
        await server.stop()
    }
}
