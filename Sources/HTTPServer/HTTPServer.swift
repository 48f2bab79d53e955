import Foundation
import Loop
import Synchronization

/// A small, strict HTTP/1.1 and WebSocket server over epoll with an async handler API.
///
/// HTTPServer is reusable: it knows nothing of phones, tokens or locations. One event-loop
/// thread owns every socket; handlers run as Swift tasks and may answer whenever they are
/// ready (long polls of minutes). A client that hangs up cancels its handler's task.
/// Handler tasks prefer the event loop as their executor, so a handler that answers at
/// once wakes no other thread; a handler must not block or compute for long between
/// `await`s (hand heavy work to another task).
///
/// Lifecycle: `start()` binds and starts the loop; `run()` waits until the server has
/// stopped; `shutdown(...)` stops accepting, closes WebSockets with a chosen code, lets
/// handlers finish until a drain deadline, then closes the rest; it has stopped once every
/// handler task has ended too (the server owns them: a connection that closes cancels its
/// handler, and the server counts each task until its body returns). The server runs on a
/// loop of its own, or on one it is given (shared with a database client, say), which it
/// then leaves running when it stops.
///
/// What it refuses (and closes): malformed requests (400), bodies without Content-Length
/// framing (411), oversized heads (431) and bodies (413), slow heads (408); WebSocket
/// protocol errors (1002), invalid UTF-8 (1007), oversized messages (1009), peers that
/// stop reading (outbound queue cap) or stop answering pings.
public final class HTTPServer: Sendable {
    /// The address the server listens on.
    public let host: String
    private let requestedPort: Int
    private let limits: HTTPServerLimits
    private let trustedProxies: TrustedProxies
    /// What the server counts (forwarding headers ignored).
    public let counters: HTTPServerCounters
    private let handler: HTTPHandler
    private let log: HTTPServerLog
    private let sharedLoop: EventLoop?
    private let state = Mutex(State())

    private struct State {
        var loop: EventLoop?
        var core: HTTPServerCore?
        var port: Int?
        var stopped = false
        var waiters: [CheckedContinuation<Void, Never>] = []
    }

    /// Creates a server; nothing is bound until `start()`.
    /// - Parameters:
    ///   - host: an IPv4 address to listen on (`127.0.0.1`, `0.0.0.0`).
    ///   - port: the port, or 0 for any free port (see `port`).
    ///   - limits: the bounds to enforce.
    ///   - trustedProxies: load balancers whose PROXY protocol header (v1 or v2) or
    ///     `X-Forwarded-For` / `Forwarded` names the client (`ForwardedFor`); anyone else's
    ///     PROXY header is refused with 400, and anyone else's forwarding headers are ignored.
    ///   - counters: where the server counts what its owner's metrics show.
    ///   - log: where the server reports failures of its own system calls (an event name
    ///     and fields without user data), called on the loop thread.
    ///   - loop: a running loop to serve on; nil starts one of the server's own.
    ///   - handler: answers every request.
    public init(host: String = "127.0.0.1", port: Int, limits: HTTPServerLimits = HTTPServerLimits(),
                trustedProxies: TrustedProxies = .none, counters: HTTPServerCounters = HTTPServerCounters(),
                log: @escaping HTTPServerLog = { _, _ in }, loop: EventLoop? = nil, handler: @escaping HTTPHandler) {
        self.sharedLoop = loop
        self.counters = counters
        self.trustedProxies = trustedProxies
        self.host = host
        self.requestedPort = port
        self.limits = limits
        self.log = log
        self.handler = handler
    }

    /// The bound port, once started.
    public var port: Int? { state.withLock { $0.port } }

    /// Binds, listens and starts the event-loop thread.
    /// - Returns: the bound port.
    @discardableResult
    public func start() throws -> Int {
        let loop = try sharedLoop ?? EventLoop()
        let core = HTTPServerCore(loop: loop, limits: limits, trustedProxies: trustedProxies, counters: counters, log: log,
                                  handler: handler)
        let port = try core.listen(host: host, port: requestedPort)
        state.withLock {
            $0.loop = loop
            $0.core = core
            $0.port = port
        }
        loop.execute { try? core.startAccepting() }
        if sharedLoop == nil {
            let thread = Thread { [self] in
                loop.run()
                finished()
            }
            thread.name = "http-loop"
            thread.start()
        }
        return port
    }

    /// Waits until the server has stopped (after `shutdown`).
    public func run() async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let done = state.withLock { state -> Bool in
                if state.stopped || state.loop == nil { return true }
                state.waiters.append(continuation)
                return false
            }
            if done { continuation.resume() }
        }
    }

    /// Graceful shutdown: stop accepting, send every WebSocket a close frame with `code` and
    /// `reason`, let running handlers finish for up to `drainTimeout`, then close every
    /// connection (cancelling the handlers left); returns when the server has stopped and
    /// every handler task has ended.
    public func shutdown(drainTimeout: Duration = .seconds(10),
                         webSocketCloseCode: UInt16 = WebSocketCloseCode.goingAway,
                         reason: String = "") async {
        guard let (loop, core) = state.withLock({ state in state.loop.flatMap { loop in state.core.map { (loop, $0) } } }) else {
            return
        }
        let deadline = loop.now + drainTimeout
        let owned = sharedLoop == nil
        loop.execute { [self] in
            // The server's own loop ends with it (its thread then reports); a shared one runs on.
            core.shutdown(deadline: deadline, code: webSocketCloseCode, reason: reason) {
                if owned { loop.stop() } else { self.finished() }
            }
        }
        await run()
    }

    /// Counts for metrics: open connections and open WebSockets (a snapshot).
    public func connectionCounts() async -> (connections: Int, webSockets: Int) {
        guard let (loop, core) = state.withLock({ state in state.loop.flatMap { loop in state.core.map { (loop, $0) } } }) else {
            return (0, 0)
        }
        return await withCheckedContinuation { continuation in
            loop.execute { continuation.resume(returning: (core.connectionCount, core.webSocketCount)) }
        }
    }

    private func finished() {
        let waiters = state.withLock { state -> [CheckedContinuation<Void, Never>] in
            state.stopped = true
            defer { state.waiters.removeAll() }
            return state.waiters
        }
        waiters.forEach { $0.resume() }
    }
}
