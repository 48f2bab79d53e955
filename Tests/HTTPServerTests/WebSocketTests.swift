import CSystem
import Foundation
import HTTPServer
import Testing

/// WebSockets end to end with the library's own client and with raw frames.
@Suite struct WebSocketTests {
    func url(_ server: TestServer) -> String { "ws://127.0.0.1:\(server.port)/ws" }

    func next(_ client: WebSocketClient) async -> WebSocketMessage? {
        var iterator = client.messages.makeAsyncIterator()
        return await iterator.next()
    }

    /// Waits until the client's connection has closed and returns its close code.
    func closed(_ client: WebSocketClient) async -> UInt16? {
        for await _ in client.messages {}
        return client.closeCode
    }

    @Test func echoesTextAndBinary() async throws {
        let server = try TestServer()
        let client = try await WebSocketClient.connect(url(server))
        client.send("héllo 🌍")
        #expect(await next(client) == .text("héllo 🌍"))
        client.send(binary: [0, 1, 2, 255])
        #expect(await next(client) == .binary([0, 1, 2, 255]))
        let big = String(repeating: "x", count: 60_000)
        client.send(big)
        #expect(await next(client) == .text(big))
        client.close()
        #expect(await closed(client) == 1000)
        await server.stop()
    }

    /// A close from the handler arrives with its code and reason (4000 "replaced").
    @Test func serverCloseCarriesCodeAndReason() async throws {
        let server = try TestServer()
        let client = try await WebSocketClient.connect(url(server))
        client.send("close 4000 replaced")
        #expect(await closed(client) == 4000)
        #expect(client.closeReason == "replaced")
        await server.stop()
    }

    /// The handler decides after reading the headers: a plain 401 with its headers instead
    /// of the upgrade, and a non-upgrade request to a WebSocket route gets the plain answer.
    @Test func handlerCanRefuseBeforeTheUpgrade() async throws {
        let server = try TestServer()
        await #expect(throws: WebSocketClient.ConnectError.rejected(status: 401, body: "no")) {
            _ = try await WebSocketClient.connect("ws://127.0.0.1:\(server.port)/ws-deny")
        }
        let raw = try await RawClient.connect(port: server.port)
        raw.send("GET /ws-deny HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n")
        let denied = await raw.readResponses(1).first
        #expect(denied?.status == 401)
        #expect(denied?.header("WWW-Authenticate") == "Bearer realm=\"test\"")
        let client = try await RawClient.connect(port: server.port)
        client.send("GET /ws HTTP/1.1\r\nHost: x\r\n\r\n")
        #expect(await client.readResponses(1).first?.status == 426)
        await server.stop()
    }

    /// Frames a client did not mask are a protocol error: close 1002.
    @Test func unmaskedClientFrameIsA1002() async throws {
        let server = try TestServer()
        let client = try await WebSocketClient.connect(url(server))
        client.sendRaw([0x81, 0x02, 0x68, 0x69])  // FIN text "hi", no mask
        #expect(await closed(client) == 1002)
        await server.stop()
    }

    /// A text message that is not UTF-8 closes with 1007.
    @Test func invalidUTF8IsA1007() async throws {
        let server = try TestServer()
        let client = try await WebSocketClient.connect(url(server))
        client.sendRaw(maskedFrame(opcode: 0x1, fin: true, payload: [0xC3, 0x28]))
        #expect(await closed(client) == 1007)
        await server.stop()
    }

    /// A message over the limit closes with 1009.
    @Test func oversizedMessageIsA1009() async throws {
        let server = try TestServer()
        let client = try await WebSocketClient.connect(url(server))
        client.send(String(repeating: "x", count: 70_000))
        #expect(await closed(client) == 1009)
        await server.stop()
    }

    /// Fragments are reassembled; a ping between them is answered and does not break it.
    @Test func fragmentedMessageIsReassembled() async throws {
        let server = try TestServer()
        let client = try await WebSocketClient.connect(url(server))
        client.sendRaw(maskedFrame(opcode: 0x1, fin: false, payload: Array("frag".utf8)))
        client.sendRaw(maskedFrame(opcode: 0x9, fin: true, payload: Array("p".utf8)))
        client.sendRaw(maskedFrame(opcode: 0x0, fin: false, payload: Array("men".utf8)))
        client.sendRaw(maskedFrame(opcode: 0x0, fin: true, payload: Array("ted".utf8)))
        #expect(await next(client) == .text("fragmented"))
        client.sendRaw(maskedFrame(opcode: 0x0, fin: true, payload: Array("stray".utf8)))
        #expect(await closed(client) == 1002)
        await server.stop()
    }

    /// Graceful shutdown closes every WebSocket with the chosen code and reason.
    @Test func shutdownClosesWebSocketsWithTheChosenCode() async throws {
        let server = try TestServer()
        let clients = try await (0..<5).asyncMap { _ in try await WebSocketClient.connect(url(server)) }
        await server.server.shutdown(drainTimeout: .seconds(2), webSocketCloseCode: 1012, reason: "restart")
        for client in clients {
            #expect(await closed(client) == 1012)
            #expect(client.closeReason == "restart")
        }
        #expect(throws: (any Error).self) { _ = try RawClient(port: server.port) }
    }

    /// A consumer's close deadline closes the socket with its code and reason; setting it
    /// again moves it, and clearing it keeps the socket open (no timer of its own: the
    /// connection's one timer keeps it). The server's loop runs on a manual clock; the
    /// connection's timer fires a millisecond past a deadline (its checks are strict).
    @Test func closeDeadlinesCloseMoveAndClear() async throws {
        let server = try TestServer(clock: .manual)
        let loop = try #require(server.loop)
        let moved = try await WebSocketClient.connect(url(server))
        moved.send("deadline 2000 4001 token_expired")
        #expect(await next(moved) == .text("ok"))
        moved.send("deadline 6000 4001 token_expired")
        #expect(await next(moved) == .text("ok"))
        let cleared = try await WebSocketClient.connect(url(server))
        cleared.send("deadline 1000 1008 hello timeout")
        #expect(await next(cleared) == .text("ok"))
        cleared.send("deadline off")
        #expect(await next(cleared) == .text("ok"))
        await loop.advance(by: .milliseconds(5999))
        moved.send("still open")
        #expect(await next(moved) == .text("still open"), "the first deadline was moved")
        cleared.send("still open")
        #expect(await next(cleared) == .text("still open"), "a cleared deadline closes nothing")
        await loop.advance(by: .milliseconds(2))
        #expect(await closed(moved) == 4001)
        #expect(moved.closeReason == "token_expired")
        await loop.advance(by: .seconds(20))
        cleared.send("still open")
        #expect(await next(cleared) == .text("still open"), "a cleared deadline closes nothing, later either")
        await server.stop()
    }

    /// The server pings an idle socket; a peer that answers stays, one that never answers is
    /// dropped once the pong's deadline passes. The server's loop runs on a manual clock, so
    /// that a loaded machine cannot make the answering peer late (in real time, beside the
    /// acceptance tests, a client once missed a 3-s deadline).
    @Test func silentPeerIsDroppedAfterPing() async throws {
        var limits = HTTPServerLimits()
        limits.webSocketPingInterval = .milliseconds(300)
        limits.webSocketPongTimeout = .milliseconds(3000)
        let server = try TestServer(limits: limits, clock: .manual)
        let loop = try #require(server.loop)
        let upgrade = "GET /ws HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n"
        let answering = try await RawClient.connect(port: server.port)
        let silent = try await RawClient.connect(port: server.port)
        for peer in [answering, silent] {
            peer.send(upgrade)
            let response = await peer.read(until: { $0.firstRange(of: Array("\r\n\r\n".utf8)) != nil })
            #expect(String(decoding: response.prefix(12), as: UTF8.self) == "HTTP/1.1 101")
        }
        let ping: [UInt8] = [0x89, 0x00]
        await loop.advance(by: .milliseconds(301))  // past the interval (the checks are strict)
        #expect(await answering.read(until: { $0.firstRange(of: ping) != nil }).firstRange(of: ping) != nil, "a ping frame arrived")
        #expect(await silent.read(until: { $0.firstRange(of: ping) != nil }).firstRange(of: ping) != nil, "a ping frame arrived")
        // The answering peer's pong, then a ping of its own: the server's pong to that says it
        // has read the first (frames are read in order) before the test moves time on.
        answering.send(maskedFrame(opcode: 0xA, fin: true, payload: []))
        answering.send(maskedFrame(opcode: 0x9, fin: true, payload: Array("sync".utf8)))
        let synced: [UInt8] = [0x8A, 0x04] + Array("sync".utf8)
        #expect(await answering.read(until: { $0.firstRange(of: synced) != nil }).firstRange(of: synced) != nil)
        await loop.advance(by: .milliseconds(3001))
        let (_, closed) = await silent.readUntilClose(timeout: 6)
        #expect(closed, "the silent peer was dropped")
        answering.send(maskedFrame(opcode: 0x1, fin: true, payload: Array("still here".utf8)))
        let echo: [UInt8] = [0x81, 0x0A] + Array("still here".utf8)
        #expect(await answering.read(until: { $0.firstRange(of: echo) != nil }).firstRange(of: echo) != nil, "the answering peer is still connected")
        // Its close, so that the server's drain (on the manual clock) has nothing to wait for.
        answering.send(maskedFrame(opcode: 0x8, fin: true, payload: [0x03, 0xE8]))
        #expect(await answering.readUntilClose(timeout: 6).closed)
        await server.stop()
    }
}

/// A masked frame built by hand.
func maskedFrame(opcode: UInt8, fin: Bool, payload: [UInt8]) -> [UInt8] {
    precondition(payload.count < 126)
    let key: [UInt8] = [1, 2, 3, 4]
    return [(fin ? 0x80 : 0) | opcode, 0x80 | UInt8(payload.count)] + key
        + payload.enumerated().map { $0.element ^ key[$0.offset & 3] }
}

extension Sequence {
    func asyncMap<T>(_ transform: (Element) async throws -> T) async rethrows -> [T] {
        var values: [T] = []
        for element in self { values.append(try await transform(element)) }
        return values
    }
}
