import Foundation
import HTTPServer
@testable import Push
import Testing
import TestSupport

/// The libcurl multi transport against a real HTTP server (ours, HTTP/1.1 over TCP).
@Suite struct CurlTransportTests {
    /// Many concurrent POSTs complete with their own status, body and headers; headers we
    /// set arrive; a response over HTTP/1.1 is refused when HTTP/2 is required.
    @Test func concurrentPostsComplete() async throws {
        let server = HTTPServer(port: 0) { request in
            let status = Int(request.queryItem("status") ?? "200") ?? 200
            return HTTPResponse(status: status, headers: ["Retry-After": "2", "X-Topic": request.headers["topic"] ?? "-"],
                                body: Array("\(request.method) \(request.body.count) \(request.headers["content-type"] ?? "-")".utf8))
        }
        let port = try server.start()
        let transport = try CurlTransport()
        transport.start()
        defer { transport.shutdown() }
        let responses = await withTaskGroup(of: (Int, PushHTTPResponse).self) { group in
            for index in 0..<40 {
                group.addTask {
                    let status = [201, 410, 429, 500][index % 4]
                    return (status, await transport.send(PushHTTPRequest(
                        url: "http://127.0.0.1:\(port)/push?status=\(status)",
                        headers: [("Content-Type", "application/octet-stream"), ("Topic", "t\(index)")],
                        body: [UInt8](repeating: 0, count: index), timeoutMilliseconds: 5000, requireHTTP2: false)))
                }
            }
            var all: [(Int, PushHTTPResponse)] = []
            for await response in group { all.append(response) }
            return all
        }
        #expect(responses.count == 40)
        for (status, response) in responses {
            #expect(response.status == status)
            #expect(response.httpVersion == 1)
            #expect(response.headers["retry-after"] == "2")
            #expect(String(decoding: response.body, as: UTF8.self).hasPrefix("POST "))
            #expect(String(decoding: response.body, as: UTF8.self).hasSuffix(" application/octet-stream"))
        }
        // 500s started new connection generations; the transport still works afterwards.
        #expect(transport.statistics.generations > 1)
        let after = await transport.send(PushHTTPRequest(url: "http://127.0.0.1:\(port)/push", headers: [], body: [1],
                                                         timeoutMilliseconds: 5000, requireHTTP2: true))
        #expect(after.status == nil, "HTTP/1.1 where HTTP/2 is required is an error")
        await server.shutdown(drainTimeout: .seconds(1))
    }

    /// A request with `ownConnection` (a sender's retry) opens a connection of its own
    /// although one to the same host waits idle in the cache, and leaves that one to the
    /// others (without it, a retry multiplexed onto a refusing connection failed again).
    @Test func aRetryGetsAConnectionOfItsOwn() async throws {
        let server = HTTPServer(port: 0) { _ in HTTPResponse(status: 200) }
        let port = try server.start()
        let transport = try CurlTransport()
        transport.start()
        defer { transport.shutdown() }
        func send(ownConnection: Bool) async -> Int? {
            await transport.send(PushHTTPRequest(url: "http://127.0.0.1:\(port)/push", headers: [], body: [1],
                                                 timeoutMilliseconds: 5000, requireHTTP2: false,
                                                 ownConnection: ownConnection)).status
        }
        #expect(await send(ownConnection: false) == 200)
        #expect(await send(ownConnection: false) == 200)
        #expect(transport.statistics.connections == 1, "the second reused the first one's connection")
        #expect(await send(ownConnection: true) == 200)
        #expect(transport.statistics.connections == 2)
        #expect(await send(ownConnection: false) == 200)
        #expect(transport.statistics.connections == 2, "the shared connection is still there")
        await server.shutdown(drainTimeout: .seconds(1))
    }

    /// No server: the outcome is unknown (no status), within the timeout.
    @Test func connectionRefusedHasNoStatus() async throws {
        let transport = try CurlTransport()
        transport.start()
        defer { transport.shutdown() }
        let response = await transport.send(PushHTTPRequest(url: "http://127.0.0.1:1/push", headers: [], body: [],
                                                            timeoutMilliseconds: 2000, requireHTTP2: false))
        #expect(response.status == nil)
        #expect(response.curlCode != 0)
    }

    /// After shutdown, sends fail at once instead of hanging.
    @Test func sendAfterShutdownFails() async throws {
        let transport = try CurlTransport()
        transport.start()
        transport.shutdown()
        let response = await transport.send(PushHTTPRequest(url: "http://127.0.0.1:1/", headers: [], body: [],
                                                            timeoutMilliseconds: 1000, requireHTTP2: false))
        #expect(response.status == nil)
    }

    /// The queue has a bound: transfers sent before the thread runs wait, up to
    /// `maximumQueued`; more fail at once. Started, the thread takes the waiting ones.
    @Test func queueIsBounded() async throws {
        let server = HTTPServer(port: 0) { _ in HTTPResponse(status: 201) }
        let port = try server.start()
        let transport = try CurlTransport(maximumQueued: 3)
        defer { transport.shutdown() }
        let request = PushHTTPRequest(url: "http://127.0.0.1:\(port)/push", headers: [], body: [1], timeoutMilliseconds: 5000,
                                      requireHTTP2: false)
        let waiting = (0..<3).map { _ in Task { await transport.send(request) } }
        try await eventually("the three transfers wait") { transport.queuedCount == 3 }
        let refused = await transport.send(request)
        #expect(refused.status == nil && refused.curlCode == 81, "CURLE_AGAIN: the queue is full")
        transport.start()
        for task in waiting { #expect(await task.value.status == 201) }
        await server.shutdown(drainTimeout: .seconds(1))
    }
}
