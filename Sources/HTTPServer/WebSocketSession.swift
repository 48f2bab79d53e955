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
    private var limits: HTTPServerLimits { connection.serverCore.limits }
    private var decoder: WebSocketFrameDecoder
    private var state = State.open
    private var lastReceived: ContinuousClock.Instant
    private var pingSentAt: ContinuousClock.Instant?
    /// The consumer's deadline (`WebSocket.close(at:code:reason:)`), while set.
    private var closeDeadline: CloseDeadline?

    /// When and how the consumer wants the socket closed.
    struct CloseDeadline {
        let at: ContinuousClock.Instant
        let code: UInt16
        let reason: String
    }
    private var task: Task<Void, Never>?

    /// Who consumes the socket's events: a task reading `messages`, or a delegate called on
    /// the loop thread (no task per idle socket).
    private var delegate: WebSocketDelegate?

    /// The socket handed to the consumer; created by `start`.
    private(set) var socket: WebSocket!

    init(connection: HTTPConnection, now: ContinuousClock.Instant) {
        self.connection = connection
        self.decoder = WebSocketFrameDecoder(role: .server, maxMessageBytes: connection.serverCore.limits.maxWebSocketMessageBytes)
        self.lastReceived = now
    }

    /// Starts the consumer: the handler's task (the socket closes normally when it returns,
    /// if still open) or the delegate.
    func start(_ consumer: HTTPResponse.WebSocketConsumer) {
        let buffered = if case .task = consumer { true } else { false }
        let socket = WebSocket(loop: connection.serverLoop, session: self, buffered: buffered)
        self.socket = socket
        switch consumer {
        case .task(let handler):
            task = Task {
                await handler(socket)
                socket.close()
            }
        case .delegate(let delegate):
            self.delegate = delegate
            delegate.webSocketDidOpen(socket)
        }
    }

    private func deliver(_ message: WebSocketMessage) {
        guard case .open = state else { return }
        if let delegate { delegate.webSocket(socket, didReceive: message) } else { socket.inbox?.deliver(message) }
    }

    func received(_ bytes: UnsafeRawBufferPointer) {
        lastReceived = connection.now
        pingSentAt = nil
        decoder.append(bytes)
        while let event = decoder.next() {
            switch event {
            case .text(let text):
                deliver(.text(text))
            case .binary(let bytes):
                deliver(.binary(bytes))
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
        notifyClosed(code: code, reason: reason)
        connection.armTimer()  // the close handshake's deadline is nearer than the keep-alive's
    }

    /// The TCP connection ended (or is being dropped).
    func transportClosed(code: UInt16 = 1006) {
        if case .closed = state { return }
        finish(code: code)
    }

    private func finish(code: UInt16, reason: String = "") {
        if case .open = state { notifyClosed(code: code, reason: reason) }
        state = .closed
    }

    /// Tells the consumer, once, how the socket closed.
    private func notifyClosed(code: UInt16, reason: String) {
        socket.didClose(code: code, reason: reason)
        if let delegate {
            self.delegate = nil
            delegate.webSocketDidClose(socket, code: code, reason: reason)
        }
    }

    /// Sets (or clears) the consumer's close deadline (loop thread).
    func setCloseDeadline(_ deadline: CloseDeadline?) {
        guard case .open = state else { return }
        closeDeadline = deadline
        connection.armTimer()
    }

    /// When `deadlinePassed` next has something to do: the consumer's close deadline, the
    /// pong's deadline, the next keep-alive ping, or the close handshake's end.
    var nextDeadline: ContinuousClock.Instant? {
        switch state {
        case .open:
            let keepAlive = pingSentAt.map { $0 + limits.webSocketPongTimeout } ?? lastReceived + limits.webSocketPingInterval
            return closeDeadline.map { min($0.at, keepAlive) } ?? keepAlive
        case .closing(let since):
            return since + limits.closeHandshakeTimeout
        case .closed:
            return nil
        }
    }

    /// The consumer's close deadline, keep-alive pings, dead-peer detection, and the
    /// close-handshake timeout.
    func deadlinePassed(now: ContinuousClock.Instant) {
        switch state {
        case .open:
            if let deadline = closeDeadline, now >= deadline.at {
                closeDeadline = nil
                close(code: deadline.code, reason: deadline.reason)
            } else if let pingSentAt {
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
