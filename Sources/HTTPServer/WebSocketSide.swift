/// The WebSocket side of an upgraded connection, kept inline in `HTTPConnection` (no object
/// of its own): the frame decoder, the keep-alive and close-handshake phase, the consumer's
/// close deadline, and who consumes the messages. `HTTPConnection+WebSocket` acts on it.
struct WebSocketSide {
    /// Where the socket is in its life.
    enum Phase {
        /// Open; `pingSentAt` while a keep-alive ping waits for any frame back.
        case open(pingSentAt: ContinuousClock.Instant?)
        /// We sent a close frame and wait for the peer's.
        case closing(since: ContinuousClock.Instant)
        /// Closed; nothing more happens.
        case closed
    }

    /// Who consumes the socket's messages: a task reading `WebSocket.messages` (through
    /// its inbox), or a delegate called on the loop thread (no task per idle socket).
    enum Consumer {
        case task(MessageInbox)
        case delegate(WebSocketDelegate)
        /// Told of the close already (or never started).
        case none
    }

    /// When and how the consumer wants the socket closed (`WebSocket.close(after:code:reason:)`).
    struct CloseDeadline: Sendable {
        let at: ContinuousClock.Instant
        let code: UInt16
        let reason: String
    }

    var decoder: WebSocketFrameDecoder
    var phase = Phase.open(pingSentAt: nil)
    /// When the peer last sent anything (the keep-alive ping is due an interval later).
    var lastReceived: ContinuousClock.Instant
    /// The consumer's close deadline, while set.
    var closeDeadline: CloseDeadline?
    var consumer = Consumer.none

    /// A freshly upgraded socket at `now`.
    init(maxMessageBytes: Int, now: ContinuousClock.Instant) {
        self.decoder = WebSocketFrameDecoder(role: .server, maxMessageBytes: maxMessageBytes)
        self.lastReceived = now
    }

    /// Whether the socket is open (not closing or closed).
    var isOpen: Bool {
        if case .open = phase { return true }
        return false
    }
}
