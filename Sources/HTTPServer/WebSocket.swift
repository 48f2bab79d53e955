/// One accepted WebSocket, handed to the handler of `HTTPResponse.webSocket`: a handle on
/// its connection, which holds every byte of the socket's state in one object (no session
/// or socket object of its own).
///
/// `send` and `close` may be called from any task; frames leave in call order.
/// `messages` yields the peer's text and binary messages (pings are answered by the
/// server) and ends when the connection closes, after which `closeCode` tells how.
/// With a delegate instead of a task, messages go to the delegate and `messages` is empty.
public struct WebSocket: Sendable, Hashable, Identifiable {
    let connection: HTTPConnection
    /// Messages for a handler task; nil for a delegate (saving memory per idle socket).
    let inbox: MessageInbox?

    /// The socket's identity: two handles are equal when they are handles on one connection.
    public var id: ObjectIdentifier { ObjectIdentifier(connection) }

    public static func == (lhs: WebSocket, rhs: WebSocket) -> Bool { lhs.connection === rhs.connection }

    public func hash(into hasher: inout Hasher) { hasher.combine(id) }

    /// The peer's messages, until the connection closes (empty with a delegate).
    public var messages: WebSocketMessages { WebSocketMessages(inbox: inbox) }

    /// Sends a text message (dropped once the socket is closing).
    public func send(_ text: String) {
        connection.enqueueFrame(WebSocketFrameEncoder.frame(.text, Array(text.utf8)))
    }

    /// Sends a binary message (dropped once the socket is closing).
    public func send(binary: [UInt8]) {
        connection.enqueueFrame(WebSocketFrameEncoder.frame(.binary, binary))
    }

    /// Starts the close handshake with `code` and `reason` (at most 123 bytes are sent).
    public func close(code: UInt16 = WebSocketCloseCode.normal, reason: String = "") {
        connection.onLoopWhileOpen { $0.closeWebSocket(code: code, reason: reason) }
    }

    /// Closes the socket with `code` and `reason` once `delay` has passed on the server's
    /// loop clock, unless called again first (nil: no deadline): the consumer's own deadline
    /// (a sign-in's, a credential's), kept by the connection's timer, so that it costs no
    /// timer of its own.
    public func close(after delay: Duration?, code: UInt16, reason: String) {
        connection.onLoopWhileOpen { connection in
            connection.setCloseDeadline(delay.map {
                WebSocketSide.CloseDeadline(at: connection.serverCore.now + max(.zero, $0), code: code, reason: reason)
            })
        }
    }

    /// How the connection closed: the code received or sent (1006 when the TCP connection
    /// ended without a close frame), nil while open.
    public var closeCode: UInt16? { connection.webSocketClose.withLock { $0?.code } }

    /// The reason that came with `closeCode`.
    public var closeReason: String { connection.webSocketClose.withLock { $0?.reason ?? "" } }
}

/// A text or binary WebSocket message.
public enum WebSocketMessage: Sendable, Equatable {
    /// A text message.
    case text(String)
    /// A binary message.
    case binary([UInt8])
}

/// The messages of one WebSocket as an async sequence (one consumer).
public struct WebSocketMessages: AsyncSequence, Sendable {
    public typealias Element = WebSocketMessage
    let inbox: MessageInbox?

    public func makeAsyncIterator() -> Iterator { Iterator(inbox: inbox) }

    /// Returns nil once the connection has closed and every message was read.
    public struct Iterator: AsyncIteratorProtocol, Sendable {
        let inbox: MessageInbox?
        public mutating func next() async -> WebSocketMessage? { await inbox?.next() }
    }
}

