import Loop

/// The WebSocket side of a connection after the upgrade (loop thread unless said): decoding,
/// ping/pong keep-alive, the close handshake, and the consumer. Its state is the
/// connection's inline `webSocket` value.
extension HTTPConnection {
    /// Starts the consumer on a freshly upgraded connection: the handler's task (the
    /// socket closes normally when it returns, if still open) or the delegate.
    func startWebSocket(_ consumer: HTTPResponse.WebSocketConsumer) {
        switch consumer {
        case .task(let handler):
            let inbox = MessageInbox()
            webSocket?.consumer = .task(inbox)
            let socket = WebSocket(connection: self, inbox: inbox)
            let core = serverCore
            core.handlerStarted()
            // Owners: the connection, through the inbox: the handler returns when it finishes
            // (the socket closed, or the server stopped); and the server, which counts the
            // task until then (a shutdown waits for it).
            Task {
                await handler(socket)
                socket.close()
                core.loop.execute { core.handlerEnded() }
            }
        case .delegate(let delegate):
            webSocket?.consumer = .delegate(delegate)
            delegate.webSocketDidOpen(WebSocket(connection: self, inbox: nil))
        }
    }

    private func deliver(_ message: WebSocketMessage) {
        guard webSocket?.isOpen == true, let consumer = webSocket?.consumer else { return }
        switch consumer {
        case .delegate(let delegate): delegate.webSocket(WebSocket(connection: self, inbox: nil), didReceive: message)
        case .task(let inbox): inbox.deliver(message)
        case .none: break
        }
    }

    /// Bytes arrived on the WebSocket.
    func webSocketReceived(_ bytes: UnsafeRawBufferPointer) {
        guard webSocket != nil else { return }
        webSocket?.lastReceived = now
        if case .open = webSocket?.phase { webSocket?.phase = .open(pingSentAt: nil) }
        webSocket?.decoder.append(bytes)
        while let event = webSocket?.decoder.next() {
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
                switch webSocket?.phase {
                case .open:
                    // Echo the peer's code, then close the TCP connection once sent.
                    let echo = code ?? WebSocketCloseCode.normal
                    send(WebSocketFrameEncoder.close(code: echo, reason: reason))
                    finishWebSocket(code: code ?? 1005, reason: reason)
                    closeWhenFlushed()
                case .closing:
                    finishWebSocket(code: code ?? 1005, reason: reason)
                    closeWhenFlushed()
                case .closed, nil:
                    break
                }
                return
            case .failure(let code):
                closeWebSocket(code: code, reason: "")
                return
            }
        }
    }

    /// Sends a data or control frame while open.
    func sendFrame(_ bytes: [UInt8]) {
        guard webSocket?.isOpen == true else { return }
        send(bytes)
    }

    /// Starts the close handshake.
    func closeWebSocket(code: UInt16, reason: String) {
        guard webSocket?.isOpen == true else { return }
        send(WebSocketFrameEncoder.close(code: code, reason: reason))
        webSocket?.phase = .closing(since: LoopInstant(now))
        notifyClosed(code: code, reason: reason)
        armTimer()  // the close handshake's deadline is nearer than the keep-alive's
    }

    /// The TCP connection ended (or is being dropped): 1006 unless said.
    func webSocketTransportClosed(code: UInt16 = 1006) {
        guard let phase = webSocket?.phase else { return }
        if case .closed = phase { return }
        finishWebSocket(code: code)
    }

    private func finishWebSocket(code: UInt16, reason: String = "") {
        if webSocket?.isOpen == true { notifyClosed(code: code, reason: reason) }
        webSocket?.phase = .closed
    }

    /// Tells the consumer, once, how the socket closed (and lets go of it, breaking the
    /// cycle through a delegate that holds its socket).
    private func notifyClosed(code: UInt16, reason: String) {
        webSocketClose.withLock { if $0 == nil { $0 = WebSocketClosed(code: code, reason: reason) } }
        guard let consumer = webSocket?.consumer else { return }
        webSocket?.consumer = .none
        switch consumer {
        case .task(let inbox): inbox.finish(code: code, reason: reason)
        case .delegate(let delegate): delegate.webSocketDidClose(WebSocket(connection: self, inbox: nil), code: code, reason: reason)
        case .none: break
        }
    }

    /// Sets (or clears) the consumer's close deadline.
    func setCloseDeadline(_ deadline: WebSocketSide.CloseDeadline?) {
        guard webSocket?.isOpen == true else { return }
        webSocket?.closeDeadline = deadline
        armTimer()
    }

    /// When `webSocketDeadlinePassed` next has something to do: the consumer's close
    /// deadline, the pong's deadline, the next keep-alive ping, or the close handshake's end.
    var webSocketDeadline: ContinuousClock.Instant? {
        guard let side = webSocket else { return nil }
        let limits = serverCore.limits
        switch side.phase {
        case .open(let pingSentAt):
            let keepAlive = pingSentAt.map { $0.instant + limits.webSocketPongTimeout } ?? side.lastReceived + limits.webSocketPingInterval
            return side.closeDeadline.map { min($0.at, keepAlive) } ?? keepAlive
        case .closing(let since):
            return since.instant + limits.closeHandshakeTimeout
        case .closed:
            return nil
        }
    }

    /// The consumer's close deadline, keep-alive pings, dead-peer detection, and the
    /// close-handshake timeout.
    func webSocketDeadlinePassed(now: ContinuousClock.Instant) {
        guard let side = webSocket else { return }
        let limits = serverCore.limits
        switch side.phase {
        case .open(let pingSentAt):
            if let deadline = side.closeDeadline, now >= deadline.at {
                webSocket?.closeDeadline = nil
                closeWebSocket(code: deadline.code, reason: deadline.reason)
            } else if let pingSentAt {
                if now - pingSentAt.instant > limits.webSocketPongTimeout {
                    webSocketTransportClosed()
                    close()
                }
            } else if now - side.lastReceived > limits.webSocketPingInterval {
                webSocket?.phase = .open(pingSentAt: LoopInstant(now))
                send(WebSocketFrameEncoder.frame(.ping, []))
            }
        case .closing(let since):
            if now - since.instant > limits.closeHandshakeTimeout { close() }
        case .closed:
            break
        }
    }

    // MARK: - From any thread (the `WebSocket` handle)

    /// Queues a frame from any thread; dropped once the socket has closed.
    func enqueueFrame(_ frame: [UInt8]) {
        onLoopWhileOpen { $0.sendFrame(frame) }
    }

    /// Runs `job` on the loop thread, unless the socket has closed already (no job then).
    func onLoopWhileOpen(_ job: @escaping @Sendable (HTTPConnection) -> Void) {
        guard webSocketClose.withLock({ $0 == nil }) else { return }
        serverLoop.execute { job(self) }
    }
}
