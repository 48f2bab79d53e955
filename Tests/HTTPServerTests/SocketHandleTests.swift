import Foundation
import HTTPServer
import Synchronization
import Testing
import TestSupport

/// A WebSocket is a handle on its connection (one object per socket), and the server keeps
/// its connections in a list through them: handles name their socket, and the counts follow
/// opens and closes in any order.
@Suite struct SocketHandleTests {
    /// Records the handles a delegate is given, per event.
    final class Recorder: WebSocketDelegate {
        let events = Mutex<[(String, WebSocket)]>([])

        func webSocketDidOpen(_ socket: WebSocket) { events.withLock { $0.append(("open", socket)) } }

        func webSocket(_ socket: WebSocket, didReceive message: WebSocketMessage) {
            events.withLock { $0.append(("message", socket)) }
            if case .text(let text) = message { socket.send("echo " + text) }
        }

        func webSocketDidClose(_ socket: WebSocket, code: UInt16, reason: String) {
            events.withLock { $0.append(("close \(code)", socket)) }
        }
    }

    func start(_ recorder: Recorder) throws -> (HTTPServer, Int) {
        let server = HTTPServer(port: 0) { request in
            guard request.isWebSocketUpgrade else { return .text(200, "ok") }
            return .webSocket(delegate: recorder)
        }
        return (server, try server.start())
    }

    /// Polls the server's counts until they are `expected` (closing happens on the loop). The
    /// limit guards against a hang and asserts no timing: a 2 s one ran out once under the
    /// parallel make test.
    func counts(_ server: HTTPServer, become expected: (Int, Int)) async -> (connections: Int, webSockets: Int) {
        try? await eventually("the counts become \(expected)") { await server.connectionCounts() == expected }
        return await server.connectionCounts()
    }

    /// Every event of one socket carries an equal handle, and different sockets' handles differ.
    @Test func aDelegateIsHandedOneHandlePerSocket() async throws {
        let recorder = Recorder()
        let (server, port) = try start(recorder)
        let first = try await WebSocketClient.connect("ws://127.0.0.1:\(port)/")
        let second = try await WebSocketClient.connect("ws://127.0.0.1:\(port)/")
        first.send("a")
        second.send("b")
        var firstMessages = first.messages.makeAsyncIterator()
        var secondMessages = second.messages.makeAsyncIterator()
        #expect(await firstMessages.next() == .text("echo a"))
        #expect(await secondMessages.next() == .text("echo b"))
        first.close(code: 4001, reason: "bye")
        while await firstMessages.next() != nil {}
        _ = await counts(server, become: (1, 1))
        let events = recorder.events.withLock { $0 }
        let opened = events.filter { $0.0 == "open" }.map(\.1)
        #expect(opened.count == 2)
        #expect(opened[0] != opened[1])
        #expect(Set(opened).count == 2)
        let firstSocket = try #require(events.first { $0.0 == "close 4001" }?.1)
        let ofFirst = events.filter { $0.1 == firstSocket }.map(\.0)
        #expect(ofFirst == ["open", "message", "close 4001"])
        #expect(firstSocket.closeCode == 4001)
        #expect(firstSocket.closeReason == "bye")
        #expect(opened.first { $0 != firstSocket }?.closeCode == nil, "the other socket is open")
        second.close()
        await server.shutdown(drainTimeout: .seconds(1))
    }

    /// Connections leave the server's list from its front, middle and end; counts follow,
    /// and shutdown walks the list to close what is left.
    @Test func countsFollowOpensAndClosesInAnyOrder() async throws {
        let recorder = Recorder()
        let (server, port) = try start(recorder)
        var plain = try await (0..<3).asyncMap { _ in try await RawClient.connect(port: port) }
        for client in plain { client.send("GET / HTTP/1.1\r\nHost: x\r\n\r\n") }
        _ = await plain.asyncMap { await $0.readResponses(1) }
        let sockets = try await (0..<3).asyncMap { _ in try await WebSocketClient.connect("ws://127.0.0.1:\(port)/") }
        #expect(await counts(server, become: (6, 3)) == (6, 3))
        // The newest connection is the list's front, the oldest its end.
        sockets[2].close()
        #expect(await counts(server, become: (5, 2)) == (5, 2))
        plain.remove(at: 0)  // deinit closes the oldest connection: the list's end
        #expect(await counts(server, become: (4, 2)) == (4, 2))
        plain.remove(at: 0)  // one from the middle
        #expect(await counts(server, become: (3, 2)) == (3, 2))
        sockets[0].close()
        #expect(await counts(server, become: (2, 1)) == (2, 1))
        await server.shutdown(drainTimeout: .seconds(1), webSocketCloseCode: 1012, reason: "restart")
        var left = sockets[1].messages.makeAsyncIterator()
        while await left.next() != nil {}
        #expect(sockets[1].closeCode == 1012)
        #expect(await plain[0].readUntilClose().closed)
        _ = plain
    }
}
