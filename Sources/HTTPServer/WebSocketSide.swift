import Loop

/// The WebSocket side of an upgraded connection, kept inline in `HTTPConnection` (no object
/// of its own): the frame decoder, the keep-alive and close-handshake phase, the consumer's
/// close deadline, and who consumes the messages. `HTTPConnection+WebSocket` acts on it.
struct WebSocketSide {
    /// Where the socket is in its life (instants in 8 bytes: `LoopInstant`).
    enum Phase {
        /// Open; `pingSentAt` while a keep-alive ping waits for any frame back.
        case open(pingSentAt: LoopInstant?)
        /// We sent a close frame and wait for the peer's.
        case closing(since: LoopInstant)
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
        private let when: LoopInstant
        let code: UInt16
        let reason: String

        init(at: ContinuousClock.Instant, code: UInt16, reason: String) {
            self.when = LoopInstant(at)
            self.code = code
            self.reason = reason
        }

        var at: ContinuousClock.Instant { when.instant }
    }

    var decoder: WebSocketFrameDecoder
    var phase = Phase.open(pingSentAt: nil)
    private var lastReceivedAt: LoopInstant
    /// The consumer's close deadline, while set.
    var closeDeadline: CloseDeadline?
    var consumer = Consumer.none

    /// A freshly upgraded socket at `now`.
    init(maxMessageBytes: Int, now: ContinuousClock.Instant) {
        self.decoder = WebSocketFrameDecoder(role: .server, maxMessageBytes: maxMessageBytes)
        self.lastReceivedAt = LoopInstant(now)
    }

    /// When the peer last sent anything (the keep-alive ping is due an interval later).
    var lastReceived: ContinuousClock.Instant {
        get { lastReceivedAt.instant }
        set { lastReceivedAt = LoopInstant(newValue) }
    }

    /// Whether the socket is open (not closing or closed).
    var isOpen: Bool {
        if case .open = phase { return true }
        return false
    }
}
