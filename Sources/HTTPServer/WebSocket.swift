import Loop
import Synchronization

/// One accepted WebSocket, handed to the handler of `HTTPResponse.webSocket`.
///
/// `send` and `close` may be called from any task; frames leave in call order.
/// `messages` yields the peer's text and binary messages (pings are answered by the
/// server) and ends when the connection closes, after which `closeCode` tells how.
/// With a delegate instead of a task, messages go to the delegate and `messages` is empty.
public final class WebSocket: Sendable {
    private let loop: EventLoop
    /// The connection's WebSocket side while open; cleared at close (breaking the cycle).
    private let session: Mutex<WebSocketSession?>
    /// Messages for a handler task; nil for a delegate (saving memory per idle socket).
    let inbox: MessageInbox?
    private let closed = Mutex<(code: UInt16, reason: String)?>(nil)

    init(loop: EventLoop, session: WebSocketSession, buffered: Bool) {
        self.loop = loop
        self.session = Mutex(session)
        self.inbox = buffered ? MessageInbox() : nil
    }

    /// The peer's messages, until the connection closes (empty with a delegate).
    public var messages: WebSocketMessages { WebSocketMessages(inbox: inbox) }

    /// Sends a text message (dropped once the socket is closing).
    public func send(_ text: String) {
        enqueue(WebSocketFrameEncoder.frame(.text, Array(text.utf8)))
    }

    /// Sends a binary message (dropped once the socket is closing).
    public func send(binary: [UInt8]) {
        enqueue(WebSocketFrameEncoder.frame(.binary, binary))
    }

    /// Starts the close handshake with `code` and `reason` (at most 123 bytes are sent).
    public func close(code: UInt16 = WebSocketCloseCode.normal, reason: String = "") {
        guard let session = session.withLock({ $0 }) else { return }
        loop.execute { session.close(code: code, reason: reason) }
    }

    /// Closes the socket with `code` and `reason` at `deadline` unless called again first
    /// (nil: no deadline): the consumer's own deadline (a sign-in's, a credential's), kept
    /// by the connection's timer, so that it costs no timer of its own.
    public func close(at deadline: ContinuousClock.Instant?, code: UInt16, reason: String) {
        guard let session = session.withLock({ $0 }) else { return }
        loop.execute { session.setCloseDeadline(deadline.map { .init(at: $0, code: code, reason: reason) }) }
    }

    /// How the connection closed: the code received or sent (1006 when the TCP connection
    /// ended without a close frame), nil while open.
    public var closeCode: UInt16? { closed.withLock { $0?.code } }

    /// The reason that came with `closeCode`.
    public var closeReason: String { closed.withLock { $0?.reason ?? "" } }

    private func enqueue(_ frame: [UInt8]) {
        guard let session = session.withLock({ $0 }) else { return }
        loop.execute { session.sendFrame(frame) }
    }

    /// Records how the socket closed and lets go of the session (loop thread).
    func didClose(code: UInt16, reason: String) {
        closed.withLock { if $0 == nil { $0 = (code, reason) } }
        session.withLock { $0 = nil }
        inbox?.finish(code: code, reason: reason)
    }
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

/// Messages from the loop thread to the handler's task, and the close code.
final class MessageInbox: Sendable {
    private struct State {
        var messages: [WebSocketMessage] = []
        var waiter: CheckedContinuation<WebSocketMessage?, Never>?
        var closeCode: UInt16?
        var closeReason = ""
        var finished = false
    }

    private let state = Mutex(State())

    /// Delivers a message (loop thread).
    func deliver(_ message: WebSocketMessage) {
        let waiter = state.withLock { state -> CheckedContinuation<WebSocketMessage?, Never>? in
            guard !state.finished else { return nil }
            if let waiter = state.waiter {
                state.waiter = nil
                return waiter
            }
            state.messages.append(message)
            return nil
        }
        waiter?.resume(returning: message)
    }

    /// Ends the sequence with the close code and reason (the first one given wins).
    func finish(code: UInt16, reason: String = "") {
        let waiter = state.withLock { state -> CheckedContinuation<WebSocketMessage?, Never>? in
            if state.closeCode == nil {
                state.closeCode = code
                state.closeReason = reason
            }
            state.finished = true
            defer { state.waiter = nil }
            return state.waiter
        }
        waiter?.resume(returning: nil)
    }

    var closeCode: UInt16? { state.withLock { $0.closeCode } }
    var closeReason: String { state.withLock { $0.closeReason } }

    func next() async -> WebSocketMessage? {
        await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<WebSocketMessage?, Never>) in
                let immediate: WebSocketMessage?? = state.withLock { state in
                    if !state.messages.isEmpty { return .some(state.messages.removeFirst()) }
                    if state.finished || Task.isCancelled { return .some(nil) }
                    state.waiter = continuation
                    return .none
                }
                if let immediate { continuation.resume(returning: immediate) }
            }
        } onCancel: {
            let waiter = state.withLock { state -> CheckedContinuation<WebSocketMessage?, Never>? in
                defer { state.waiter = nil }
                return state.waiter
            }
            waiter?.resume(returning: nil)
        }
    }
}

/// Receives a WebSocket's events on the server's event-loop thread, in order. Methods must
/// not block; `send` and `close` on the socket may be called from them or from any task.
public protocol WebSocketDelegate: AnyObject, Sendable {
    /// The upgrade completed.
    func webSocketDidOpen(_ socket: WebSocket)
    /// A complete text or binary message arrived.
    func webSocket(_ socket: WebSocket, didReceive message: WebSocketMessage)
    /// The socket closed (close frame sent or received, or the connection dropped: 1006).
    func webSocketDidClose(_ socket: WebSocket, code: UInt16, reason: String)
}
