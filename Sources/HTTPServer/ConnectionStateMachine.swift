import Loop

/// What one connection is doing, and every decision about it that is not I/O: when its
/// response ends it, when it lingers, when reading resumes, which deadline is next and what
/// passing it means. `HTTPConnection` reads, parses and writes; it tells the machine what
/// happened and performs the `Actions` it returns (Hummingbird's connection state machine
/// has the same shape). The clock is injected: every event that needs the time carries it,
/// so the tests drive the machine with instants of their own.
struct ConnectionStateMachine {
    /// Where the connection is in its life.
    enum Phase: Equatable {
        /// HTTP; `busy` while a handler (or a streamed response) is running.
        case http(busy: Bool)
        /// Its last response is out; input is read and discarded until `until` or
        /// `bytesLeft` more bytes, so that closing sends no reset over an unread request.
        case lingering(until: LoopInstant, bytesLeft: Int)
        /// A WebSocket after a 101 (its session keeps its own deadlines).
        case webSocket
        /// Closed; nothing more happens.
        case closed
    }

    /// What the connection must do: a set, performed in one fixed order (the order of the
    /// declarations below), so an event's actions cost no allocation.
    struct Actions: OptionSet, Equatable {
        let rawValue: UInt8
        /// Shut the write side down (the linger begins).
        static let shutdownWrite = Actions(rawValue: 1 << 0)
        /// Reading was paused or resumed: set the socket's epoll interest again.
        static let updateInterest = Actions(rawValue: 1 << 1)
        /// Reading resumed: parse what is already buffered.
        static let parseBuffered = Actions(rawValue: 1 << 2)
        /// Start the handler of the oldest waiting request.
        static let dispatchNext = Actions(rawValue: 1 << 3)
        /// Answer 408: the request head took too long.
        static let respondTimeout = Actions(rawValue: 1 << 4)
        /// Close the socket now.
        static let close = Actions(rawValue: 1 << 5)
    }

    /// The limits the decisions use: one object the server's connections share (a
    /// machine lives in every connection, so it holds a reference, not four copies).
    final class Timeouts: Sendable {
        let headerRead: Duration
        let idle: Duration
        let linger: Duration
        let maxLingerBytes: Int

        init(headerRead: Duration, idle: Duration, linger: Duration, maxLingerBytes: Int) {
            self.headerRead = headerRead
            self.idle = idle
            self.linger = linger
            self.maxLingerBytes = maxLingerBytes
        }
    }

    /// Requests that may wait unanswered before reading pauses (bounded pipelining).
    static let maximumPending = 16

    let timeouts: Timeouts
    private(set) var phase = Phase.http(busy: false)
    /// Whether reading is paused (a WebSocket upgrade waits, a failure, many pipelined requests).
    private(set) var readingPaused = false
    /// Whether the connection ends once what is queued is written.
    private(set) var closeAfterFlush = false
    /// Whether it lingers (rather than closing at once) once that is written.
    private var lingerAfterFlush = false
    /// Set during graceful shutdown: the request in flight is finished, then it closes.
    private(set) var draining = false
    // Instants in 8 bytes (`LoopInstant`): the machine is inline in every connection.
    private var lastActivityAt: LoopInstant
    private var requestStartedAt: LoopInstant?

    /// A new connection at `now` (its first bytes start its request head's deadline; until
    /// they come, its idle deadline holds).
    init(timeouts: Timeouts, now: ContinuousClock.Instant) {
        self.timeouts = timeouts
        self.lastActivityAt = LoopInstant(now)
    }

    /// Whether the connection has closed.
    var isClosed: Bool { phase == .closed }

    /// Whether a handler is still running or a WebSocket is open (graceful shutdown waits).
    var isBusy: Bool { phase == .http(busy: true) || phase == .webSocket }

    /// Whether the socket must be read: not paused, or lingering.
    var wantsReads: Bool {
        if case .lingering = phase { return true }
        return !readingPaused && phase != .closed
    }

    /// Whether the next waiting request may start now.
    var canDispatch: Bool { phase == .http(busy: false) && !closeAfterFlush }

    // MARK: Events

    /// Bytes arrived on an HTTP connection: a request head starts now if none had.
    mutating func received(now: ContinuousClock.Instant) {
        lastActivityAt = LoopInstant(now)
        if requestStartedAt == nil { requestStartedAt = LoopInstant(now) }
    }

    /// A request was parsed; `midRequest` when the next one has begun already.
    mutating func parsed(midRequest: Bool, now: ContinuousClock.Instant) {
        requestStartedAt = midRequest ? LoopInstant(now) : nil
    }

    /// The request could not be parsed (its error response is next): reading stops.
    mutating func parseFailed() -> Actions {
        requestStartedAt = nil
        return pause()
    }

    /// Stops reading (a WebSocket upgrade waits for its handler; many requests wait).
    mutating func pause() -> Actions {
        guard !readingPaused else { return [] }
        readingPaused = true
        return [.updateInterest]
    }

    /// Reading may go on when `pending` requests wait: unless the connection is ending.
    mutating func resume(pending: Int) -> Actions {
        guard readingPaused, pending <= Self.maximumPending, phase == .http(busy: false), !closeAfterFlush else { return [] }
        readingPaused = false
        return [.updateInterest, .parseBuffered]
    }

    /// A handler (or a streamed response's producer) started.
    mutating func handlerStarted() {
        phase = .http(busy: true)
    }

    /// A response is about to be queued: with `keepAlive` false the connection ends once it
    /// is written, lingering first after an error (`status` 400 or more) unless it was
    /// streamed. Call before queuing its bytes, so the flush that writes them ends it.
    mutating func responding(status: Int, keepAlive: Bool, streamed: Bool = false, now: ContinuousClock.Instant) {
        if case .http = phase { phase = .http(busy: false) }
        lastActivityAt = LoopInstant(now)
        guard !keepAlive else { return }
        closeAfterFlush = true
        lingerAfterFlush = !streamed && status >= 400
    }

    /// A response was queued: the next request may go, unless the connection is ending.
    mutating func responded(pending: Int) -> Actions {
        guard canDispatch else { return [] }
        return resume(pending: pending).union(.dispatchNext)
    }

    /// The connection ends once what is queued is written (a WebSocket's close).
    mutating func closeWhenFlushed() {
        closeAfterFlush = true
    }

    /// Everything queued is written: an ending connection lingers or closes.
    mutating func flushed(now: ContinuousClock.Instant) -> Actions {
        guard closeAfterFlush else { return [] }
        switch phase {
        case .http where lingerAfterFlush:
            lingerAfterFlush = false
            phase = .lingering(until: LoopInstant(now + timeouts.linger), bytesLeft: timeouts.maxLingerBytes)
            readingPaused = false
            return [.shutdownWrite, .updateInterest]
        case .lingering, .closed:
            return []
        case .http, .webSocket:
            return [.close]
        }
    }

    /// `count` bytes were read and discarded while lingering (0 or less: end of input).
    mutating func discarded(_ count: Int) -> Actions {
        guard case .lingering(let until, let left) = phase else { return [] }
        let bytesLeft = left - max(0, count)
        phase = .lingering(until: until, bytesLeft: bytesLeft)
        return count <= 0 || bytesLeft <= 0 ? [.close] : []
    }

    /// The 101 went out: the connection is a WebSocket from now on.
    mutating func upgraded() -> Actions {
        phase = .webSocket
        requestStartedAt = nil
        readingPaused = false
        return [.updateInterest]
    }

    /// The socket closed.
    mutating func closed() {
        phase = .closed
    }

    /// Graceful shutdown: an idle HTTP connection closes once its output is written; a busy
    /// one after its response (which goes without keep-alive).
    mutating func drain() {
        draining = true
        if phase == .http(busy: false) { closeAfterFlush = true }
    }

    // MARK: Deadlines

    /// The earliest instant at which `deadlinePassed` has something to do over HTTP: the
    /// linger's end, the request head's or the idle timeout; nil for none (a handler is
    /// running, a WebSocket keeps its own). `idle`: no request waits or is half-read.
    func nextDeadline(idle: Bool) -> ContinuousClock.Instant? {
        switch phase {
        case .lingering(let until, _): return until.instant
        case .http(busy: false):
            if let started = requestStartedAt { return started.instant + timeouts.headerRead }
            return idle ? lastActivityAt.instant + timeouts.idle : nil
        case .http(busy: true), .webSocket, .closed: return nil
        }
    }

    /// A deadline may have passed at `now` (checks are strict: a timer fires just after).
    func deadlinePassed(now: ContinuousClock.Instant, idle: Bool) -> Actions {
        switch phase {
        case .lingering(let until, _):
            return now >= until.instant ? [.close] : []
        case .http(busy: false):
            if let started = requestStartedAt, now - started.instant > timeouts.headerRead { return [.respondTimeout] }
            if idle, now - lastActivityAt.instant > timeouts.idle { return [.close] }
            return []
        case .http(busy: true), .webSocket, .closed:
            return []
        }
    }
}
