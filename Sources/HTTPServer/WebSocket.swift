import Synchronization

/// One accepted WebSocket, handed to the handler of `HTTPResponse.webSocket`.
///
/// `send` and `close` may be called from any task; frames leave in call order.
/// `messages` yields the peer's text and binary messages (pings are answered by the
/// server) and ends when the connection closes, after which `closeCode` tells how.
public final class WebSocket: Sendable {
    /// The upgrade request (headers, path, query).
    public let request: HTTPRequest
    let inbox = MessageInbox()
    private let outbound: @Sendable (Outbound) -> Void

    /// What the handler asks the connection to do.
    enum Outbound: Sendable {
        case frame([UInt8])
        case close(code: UInt16, reason: String)
    }

    init(request: HTTPRequest, outbound: @escaping @Sendable (Outbound) -> Void) {
        self.request = request
        self.outbound = outbound
    }

    /// The peer's messages, until the connection closes.
    public var messages: WebSocketMessages { WebSocketMessages(inbox: inbox) }

    /// Sends a text message (dropped once the socket is closing).
    public func send(_ text: String) {
        outbound(.frame(WebSocketFrameEncoder.frame(.text, Array(text.utf8))))
    }

    /// Sends a binary message (dropped once the socket is closing).
    public func send(binary: [UInt8]) {
        outbound(.frame(WebSocketFrameEncoder.frame(.binary, binary)))
    }

    /// Starts the close handshake with `code` and `reason` (at most 123 bytes are sent).
    public func close(code: UInt16 = WebSocketCloseCode.normal, reason: String = "") {
        outbound(.close(code: code, reason: reason))
    }

    /// How the connection closed: the code received or sent (1006 when the TCP connection
    /// ended without a close frame), nil while open.
    public var closeCode: UInt16? { inbox.closeCode }

    /// The reason that came with `closeCode`.
    public var closeReason: String { inbox.closeReason }
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
    let inbox: MessageInbox

    public func makeAsyncIterator() -> Iterator { Iterator(inbox: inbox) }

    /// Returns nil once the connection has closed and every message was read.
    public struct Iterator: AsyncIteratorProtocol, Sendable {
        let inbox: MessageInbox
        public mutating func next() async -> WebSocketMessage? { await inbox.next() }
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
