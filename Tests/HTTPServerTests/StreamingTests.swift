import Foundation
import HTTPServer
import TestSupport
import Testing

/// Streamed (chunked) responses, as Server-Sent Events use them.
@Suite struct StreamingTests {
    /// Chunks arrive in order and framed; with Connection: close the socket closes after
    /// the last chunk.
    @Test func chunksArriveAndTheBodyEnds() async throws {
        let server = try TestServer()
        let client = try await RawClient.connect(port: server.port)
        client.send("GET /stream HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        let (bytes, closed) = await client.readUntilClose()
        let text = String(decoding: bytes, as: UTF8.self)
        #expect(text.hasPrefix("HTTP/1.1 200 OK\r\n"))
        #expect(text.contains("Transfer-Encoding: chunked\r\n") && !text.contains("Content-Length"))
        #expect(text.hasSuffix("\r\n\r\n9\r\ndata: 1\n\n\r\n9\r\ndata: 2\n\n\r\n9\r\ndata: 3\n\n\r\n0\r\n\r\n"))
        #expect(closed)
        await server.stop()
    }

    /// curl (an outside client) decodes it, and the connection serves the next request.
    @Test func curlReadsItAndReusesTheConnection() async throws {
        let server = try TestServer()
        let output = try await ChildProcess.run(URL(fileURLWithPath: "/usr/bin/curl"),
                                                ["-s", "-w", "|%{num_connects}", "http://127.0.0.1:\(server.port)/stream",
                                                 "http://127.0.0.1:\(server.port)/hello"]).stdout
        #expect(output == "data: 1\n\ndata: 2\n\ndata: 3\n\n|1GET /hello|0", "got \(output)")
        await server.stop()
    }
}
