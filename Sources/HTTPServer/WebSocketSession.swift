/// The WebSocket side of a connection after the upgrade, confined to the loop thread:
/// decoding, ping/pong keep-alive, the close handshake, and the handler's task.
final class WebSocketSession: @unchecked Sendable {
    private enum State {
        case open
        /// We sent a close frame and wait for the peer's.
        case closing(since: ContinuousClock.Instant)
        case closed
    }

    private unowned let connection: HTTPConnection
    private let limits: HTTPServerLimits
    private var decoder: WebSocketFrameDecoder
    private var state = State.open
    private var lastReceived: ContinuousClock.Instant
    private var pingSentAt: ContinuousClock.Instant?
    private var task: Task<Void, Never>?
    let socket: WebSocket

    init(connection: HTTPConnection, request: HTTPRequest, limits: HTTPServerLimits, now: ContinuousClock.Instant) {
        self.connection = connection
        self.limits = limits
        self.decoder = WebSocketFrameDecoder(role: .server, maxMessageBytes: limits.maxWebSocketMessageBytes)
        self.lastReceived = now
        let loop = connection.serverLoop
        let weakConnection = WeakConnection(connection)
        self.socket = WebSocket(request: request) { outbound in
            loop.execute {
                guard let session = weakConnection.value?.webSocketSession else { return }
                switch outbound {
                case .frame(let bytes): session.sendFrame(bytes)
                case .close(let code, let reason): session.close(code: code, reason: reason)
                }
            }
        }
    }

    /// Runs the handler; when it returns, the socket closes normally (if still open).
    func start(handler: @escaping @Sendable (WebSocket) async -> Void) {
        let socket = self.socket
        task = Task {
            await handler(socket)
            socket.close()
        }
    }

    func received(_ bytes: UnsafeRawBufferPointer) {
        lastReceived = connection.now
        pingSentAt = nil
        decoder.append(bytes)
        while let event = decoder.next() {
            switch event {
            case .text(let text):
                if case .open = state { socket.inbox.deliver(.text(text)) }
            case .binary(let bytes):
                if case .open = state { socket.inbox.deliver(.binary(bytes)) }
            case .ping(let payload):
                sendFrame(WebSocketFrameEncoder.frame(.pong, payload))
            case .pong:
                break
            case .close(let code, let reason):
                switch state {
                case .open:
                    // Echo the peer's code, then close the TCP connection once sent.
                    let echo = code ?? WebSocketCloseCode.normal
                    connection.send(WebSocketFrameEncoder.close(code: echo, reason: reason))
                    finish(code: code ?? 1005, reason: reason)
                    connection.closeWhenFlushed()
                case .closing:
                    finish(code: code ?? 1005, reason: reason)
                    connection.closeWhenFlushed()
                case .closed:
                    break
                }
                return
            case .failure(let code):
                close(code: code, reason: "")
                return
            }
        }
    }

    /// Sends a data or control frame while open.
    func sendFrame(_ bytes: [UInt8]) {
        guard case .open = state else { return }
        connection.send(bytes)
    }

    /// Starts the close handshake.
    func close(code: UInt16, reason: String) {
        guard case .open = state else { return }
        connection.send(WebSocketFrameEncoder.close(code: code, reason: reason))
        state = .closing(since: connection.now)
        socket.inbox.finish(code: code, reason: reason)
    }

    /// The TCP connection ended (or is being dropped).
    func transportClosed(code: UInt16 = 1006) {
        if case .closed = state { return }
        finish(code: code)
    }

    private func finish(code: UInt16, reason: String = "") {
        state = .closed
        socket.inbox.finish(code: code, reason: reason)
    }

    /// Keep-alive pings, dead-peer detection, and the close-handshake timeout.
    func tick(now: ContinuousClock.Instant) {
        switch state {
        case .open:
            if let pingSentAt {
                if now - pingSentAt > limits.webSocketPongTimeout {
                    transportClosed()
                    connection.close()
                }
            } else if now - lastReceived > limits.webSocketPingInterval {
                pingSentAt = now
                connection.send(WebSocketFrameEncoder.frame(.ping, []))
            }
        case .closing(let since):
            if now - since > limits.closeHandshakeTimeout { connection.close() }
        case .closed:
            break
        }
    }
}

/// A weak reference to a connection that a handler's task may hold without keeping the
/// connection alive; read only on the loop thread.
final class WeakConnection: @unchecked Sendable {
    weak var value: HTTPConnection?
    init(_ value: HTTPConnection) { self.value = value }
}
