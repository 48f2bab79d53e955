import CSystem
import Glibc
import Loop
import Synchronization

/// One client connection, confined to the event loop's thread: HTTP/1.1 with pipelining
/// answered in order, then possibly a WebSocket.
///
/// The connection does the I/O — reading, parsing, writing, epoll interest, its one timer —
/// and `ConnectionStateMachine` decides: it is told what happened and returns what to do.
/// Handler calls run as tasks owned by the connection; a client that hangs up cancels them.
final class HTTPConnection: EventLoopSource, LoopDeadlineOwner, @unchecked Sendable {
    /// Items waiting to be answered, in order.
    enum Pending {
        case request(HTTPRequest)
        case failure(status: Int)
    }

    let fd: Int32
    /// Whether the peer is a trusted proxy (its PROXY header is believed).
    let viaTrustedProxy: Bool
    /// Whether this connection was upgraded (for the server's WebSocket count).
    var wasWebSocket = false
    private(set) var token: UInt64 = 0
    unowned let serverCore: HTTPServerCore
    var machine: ConnectionStateMachine
    /// The client's IP address (for the handler, e.g. rate limits per client): the peer's,
    /// or the one a trusted proxy's PROXY header names.
    var remoteAddress: String
    /// What only HTTP needs — the parser, the waiting requests, the handler task — while
    /// the connection speaks HTTP; nil once it is a WebSocket, so an idle phone's socket
    /// keeps none of it (docs/architecture.md, "One instance").
    var http: HTTPSide?
    private var outbound = OutboundQueue()
    /// Where the loop keeps the connection's one deadline (its earliest; see `armTimer`).
    var deadlineSlot = -1
    /// The WebSocket side, inline, once upgraded and until closed.
    var webSocket: WebSocketSide?
    /// How the WebSocket closed, once it did (read from any thread by `WebSocket`). A
    /// reference: an open socket keeps 16 bytes here, not the 32 of the code and reason.
    let webSocketClose = Mutex<WebSocketClosed?>(nil)
    /// The server's list of its connections runs through them (no table of its own).
    var nextInServer: HTTPConnection?
    unowned(unsafe) var previousInServer: HTTPConnection?

    /// How a WebSocket closed: the code received or sent, and its reason.
    final class WebSocketClosed: Sendable {
        let code: UInt16
        let reason: String

        init(code: UInt16, reason: String) {
            self.code = code
            self.reason = reason
        }
    }

    /// The HTTP-only state, in an object of its own so that it can be let go of at the
    /// upgrade (inline, its bytes would stay with every WebSocket).
    final class HTTPSide {
        var parser: HTTPRequestParser
        /// Items waiting to be answered, in order.
        var pending: [Pending] = []
        /// Until the first bytes show whether a PROXY header comes: what arrived so far.
        var proxyPrelude: [UInt8]? = []
        /// The handler (or stream producer) task of the request being answered.
        var inFlight: Task<Void, Never>?

        init(limits: HTTPServerLimits) {
            parser = HTTPRequestParser(limits: limits)
        }
    }

    init(fd: Int32, remoteAddress: String, server: HTTPServerCore, now: ContinuousClock.Instant, viaTrustedProxy: Bool = false) {
        self.fd = fd
        self.viaTrustedProxy = viaTrustedProxy
        self.remoteAddress = remoteAddress
        self.serverCore = server
        self.http = HTTPSide(limits: serverCore.limits)
        self.machine = ConnectionStateMachine(timeouts: serverCore.timeouts, now: now)
    }

    func register() throws {
        token = try serverCore.loop.register(fd, events: WB_EPOLLIN | WB_EPOLLRDHUP, source: self)
        // A new connection's first deadline is its request head's (its first bytes come
        // now): the timer armed here is the one they need, not an idle one they replace.
        arm(at: serverCore.now + serverCore.limits.headerReadTimeout)
    }

    var isClosed: Bool { machine.isClosed }

    // MARK: - Events

    func handle(events: UInt32) {
        defer { armTimer() }
        if events & WB_EPOLLOUT != 0 { flush() }
        if isClosed { return }
        if events & (WB_EPOLLIN | WB_EPOLLHUP | WB_EPOLLERR | WB_EPOLLRDHUP) != 0 { readAvailable() }
    }

    /// Performs the machine's actions, in their fixed order.
    func perform(_ actions: ConnectionStateMachine.Actions) {
        if actions.contains(.shutdownWrite) {
            _ = shutdown(fd, Int32(SHUT_WR))
            armTimer()
        }
        if actions.contains(.updateInterest) { updateInterest() }
        if actions.contains(.parseBuffered) { parseRequests() }
        if actions.contains(.dispatchNext) { dispatchNext() }
        if actions.contains(.respondTimeout) { respond(.text(408, "Request Timeout"), keepAlive: false) }
        if actions.contains(.close) { close() }
    }

    private func readAvailable() {
        if case .lingering = machine.phase {
            let count = serverCore.scratch.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
            if count < 0 && (errno == EAGAIN || errno == EINTR) { return }
            perform(machine.discarded(count))
            return
        }
        let count = serverCore.scratch.withUnsafeMutableBytes { buffer in
            read(fd, buffer.baseAddress, buffer.count)
        }
        if count < 0 && (errno == EAGAIN || errno == EINTR) { return }
        if count <= 0 {
            peerClosed()
            return
        }
        serverCore.scratch.withUnsafeBytes { buffer in
            let bytes = UnsafeRawBufferPointer(rebasing: buffer[0..<count])
            if webSocket != nil {
                webSocketReceived(bytes)
                return
            }
            guard case .http = machine.phase else { return }
            machine.received(now: serverCore.now)
            if http?.proxyPrelude != nil {
                guard takeProxyHeader(bytes) else { return }
            } else {
                http?.parser.append(bytes)
            }
            parseRequests()
        }
    }

    private func peerClosed() {
        http?.inFlight?.cancel()
        webSocketTransportClosed()
        close()
    }

    // MARK: - Output

    /// Queues bytes and writes what the socket takes now.
    func send(_ bytes: [UInt8]) {
        guard !isClosed else { return }
        outbound.append(bytes)
        if outbound.count > serverCore.limits.maxOutboundBytesPerConnection {
            // A peer that does not read: stop spending memory on it.
            webSocketTransportClosed(code: WebSocketCloseCode.policyViolation)
            close()
            return
        }
        flush()
    }

    private func flush() {
        while let chunk = outbound.front {
            // send with MSG_NOSIGNAL: a peer that reset the connection is EPIPE here, never a
            // SIGPIPE that would end the process.
            let written = chunk.withUnsafeBytes { Glibc.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            if written < 0 {
                if errno == EAGAIN || errno == EINTR { break }
                peerClosed()
                return
            }
            outbound.consume(written)
        }
        if outbound.isEmpty && machine.closeAfterFlush {
            perform(machine.flushed(now: serverCore.now))  // linger or close
            return
        }
        updateInterest()
    }

    func updateInterest() {
        guard !isClosed else { return }
        var events = WB_EPOLLRDHUP
        if machine.wantsReads { events |= WB_EPOLLIN }
        if !outbound.isEmpty { events |= WB_EPOLLOUT }
        serverCore.loop.modify(fd, token: token, events: events)
    }

    /// Sends what is queued, then closes.
    func closeWhenFlushed() {
        machine.closeWhenFlushed()
        if outbound.isEmpty { close() } else { updateInterest() }
    }

    /// Closes the socket now; an in-flight handler is cancelled.
    func close() {
        http?.inFlight?.cancel()
        webSocketTransportClosed()
        guard !isClosed else { return }
        machine.closed()
        webSocket = nil
        http?.inFlight = nil
        serverCore.loop.clearDeadline(self)
        serverCore.loop.deregister(fd, token: token)
        Glibc.close(fd)
        outbound = OutboundQueue()
        serverCore.connectionClosed(self)
    }

    // MARK: - Timeouts and shutdown

    /// Whether no request waits or is half-read (the idle timeout applies).
    private var idle: Bool { http.map { $0.pending.isEmpty && !$0.parser.isMidRequest } ?? true }

    /// The earliest instant at which `deadlinePassed` has something to do: the machine's
    /// (linger, request head, idle) or the WebSocket's (keep-alive, close handshake); nil
    /// for none (a handler is running: its response re-arms).
    private var nextDeadline: ContinuousClock.Instant? {
        if webSocket != nil { return webSocketDeadline }
        return machine.nextDeadline(idle: idle)
    }

    /// Arms the connection's timer at its next deadline, unless one is armed no later.
    /// Activity only moves deadlines later, so reads and writes leave the timer alone: a
    /// timer that fires early re-checks and re-arms. Only a deadline that moved earlier (a
    /// request started, a linger, a close handshake) re-arms at once. No sweep visits idle
    /// connections.
    func armTimer() {
        if let deadline = nextDeadline { arm(at: deadline) }
    }

    /// Sets the connection's deadline at `deadline` unless it is set no later. The loop
    /// keeps it in place in its deadline heap: no timer object, closure or allocation per
    /// connection, and the heap holds the connection only while the deadline is set.
    private func arm(at deadline: ContinuousClock.Instant) {
        guard !isClosed else { return }
        if let due = serverCore.loop.deadline(of: self), due <= deadline { return }
        // Just past the deadline: the checks are strict (`>`), so it must not fire on the
        // deadline itself.
        serverCore.loop.setDeadline(self, at: deadline + .milliseconds(1))
    }

    /// The loop: the connection's deadline passed.
    func deadlineReached(now: ContinuousClock.Instant) {
        deadlinePassed(now: now)
        armTimer()
    }

    /// Enforces the header-read, idle and linger timeouts and the WebSocket's deadlines.
    func deadlinePassed(now: ContinuousClock.Instant) {
        if webSocket != nil {
            webSocketDeadlinePassed(now: now)
        } else {
            perform(machine.deadlinePassed(now: now, idle: idle))
        }
    }

    /// Graceful shutdown: idle HTTP connections close now, busy ones after their response;
    /// WebSockets get a close frame with `code` and `reason`.
    func drain(code: UInt16, reason: String) {
        defer { armTimer() }
        machine.drain()
        if webSocket != nil {
            closeWebSocket(code: code, reason: reason)
            return
        }
        http?.pending.removeAll()
        if !machine.isBusy { closeWhenFlushed() }  // idle or lingering: now
    }

    /// Whether a handler is still running (graceful shutdown waits for these).
    var isBusy: Bool { machine.isBusy }
}
