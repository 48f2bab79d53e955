import CSystem
import Glibc
import Loop

/// The server's state on its loop thread: the listening socket, the connections, and
/// graceful shutdown.
final class HTTPServerCore: EventLoopSource, @unchecked Sendable {
    let loop: EventLoop
    let limits: HTTPServerLimits
    let handler: HTTPHandler
    /// The timeouts every connection's state machine decides with (shared, not copied).
    let timeouts: ConnectionStateMachine.Timeouts
    /// One read buffer shared by every connection of the loop (reads never overlap).
    var scratch = [UInt8](repeating: 0, count: 64 * 1024)
    /// Now (connections stamp their activity with it).
    var now: ContinuousClock.Instant { loop.now }
    private var listenFD: Int32 = -1
    private var listenToken: UInt64 = .max
    /// The pause of accepting and the end of a graceful shutdown, while armed.
    private var acceptTimer: LoopTimer?
    private var shutdownTimer: LoopTimer?
    /// The open connections, as a list through them: the loop's registration table is
    /// the only table with an entry per socket.
    private var connections: HTTPConnection?
    private(set) var connectionCount = 0
    private(set) var webSocketCount = 0
    private var shutdownDeadline: ContinuousClock.Instant?
    private var onStopped: (() -> Void)?
    /// Handler tasks (a request's, a streamed response's producer, a WebSocket's consumer)
    /// not yet ended: the server owns them, and a shutdown ends only once they have.
    private(set) var handlerTasks = 0
    /// While set, accepting is paused (out of descriptors) until this time.
    private var acceptPausedUntil: ContinuousClock.Instant?
    /// The connection cap: the configured one, or less when the open-files limit is lower.
    let maxConnections: Int
    /// Where failures of the server's own system calls are reported.
    let log: HTTPServerLog
    /// Peers whose PROXY protocol header or forwarding headers name the client.
    let trustedProxies: TrustedProxies
    let counters: HTTPServerCounters

    init(loop: EventLoop, limits: HTTPServerLimits, trustedProxies: TrustedProxies = .none,
         counters: HTTPServerCounters = HTTPServerCounters(), log: @escaping HTTPServerLog, handler: @escaping HTTPHandler) {
        self.loop = loop
        self.trustedProxies = trustedProxies
        self.counters = counters
        self.limits = limits
        self.handler = handler
        self.log = log
        self.timeouts = .init(headerRead: limits.headerReadTimeout, idle: limits.idleTimeout, linger: limits.lingerTimeout,
                              maxLingerBytes: limits.maxLingerBytes)
        let files = OpenFilesLimit.raiseToHard()
        self.maxConnections = max(1, min(limits.maxConnections, files - limits.reservedFileDescriptors))
    }

    /// The listening socket is readable (loop thread).
    func handle(events: UInt32) {
        acceptAll()
    }

    /// Binds and listens; returns the port (useful with port 0).
    func listen(host: String, port: Int, backlog: Int32 = 4096) throws -> Int {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_NONBLOCK.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw HTTPServerError.system("socket", errno) }
        var yes: Int32 = 1
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &yes, socklen_t(MemoryLayout<Int32>.size))
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = UInt16(port).bigEndian
        guard inet_pton(AF_INET, host, &address.sin_addr) == 1 else {
            Glibc.close(fd)
            throw HTTPServerError.system("inet_pton \(host)", EINVAL)
        }
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard bound == 0, Glibc.listen(fd, backlog) == 0 else {
            let code = errno
            Glibc.close(fd)
            throw HTTPServerError.system("bind/listen \(host):\(port)", code)
        }
        var actual = sockaddr_in()
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &actual) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) }
        }
        listenFD = fd
        return Int(UInt16(bigEndian: actual.sin_port))
    }

    /// The client of a request that came from `peer` (the socket's peer, or the client a
    /// PROXY header named): what its `X-Forwarded-For` / `Forwarded` says when `peer` is a
    /// trusted proxy (`ForwardedFor`), else `peer`.
    func client(of headers: HTTPHeaders, peer: String) -> String {
        guard !trustedProxies.isEmpty, let address = IPAddress(peer), trustedProxies.contains(address) else { return peer }
        switch ForwardedFor.client(headers, trusted: trustedProxies) {
        case .absent:
            return peer
        case .client(let client):
            return client
        case .ignored:
            counters.countForwardedHeaderIgnored()
            return peer
        }
    }

    /// Starts accepting (loop thread). Each connection keeps its own deadlines (timers).
    func startAccepting() throws {
        listenToken = try loop.register(listenFD, events: WB_EPOLLIN, source: self)
    }

    /// The listening socket is readable: accept every waiting connection.
    private func acceptAll() {
        let now = self.now
        while listenFD >= 0, acceptPausedUntil == nil {
            var address = sockaddr_in()
            var length = socklen_t(MemoryLayout<sockaddr_in>.size)
            let fd = withUnsafeMutablePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { wb_accept(listenFD, $0, &length) }
            }
            if fd < 0 {
                let code = errno
                if code == EMFILE || code == ENFILE || code == ENOBUFS || code == ENOMEM { pauseAccepting(errno: code) }
                return
            }
            if connectionCount >= maxConnections || shutdownDeadline != nil {
                Glibc.close(fd)
                continue
            }
            var yes: Int32 = 1
            setsockopt(fd, Int32(IPPROTO_TCP), TCP_NODELAY, &yes, socklen_t(MemoryLayout<Int32>.size))
            let connection = HTTPConnection(fd: fd, remoteAddress: Self.text(of: address.sin_addr), server: self, now: now,
                                            viaTrustedProxy: trustedProxies.contains(networkOrder: address.sin_addr.s_addr))
            do {
                try connection.register()
                insert(connection)
            } catch {
                Glibc.close(fd)
            }
        }
    }

    func connectionClosed(_ connection: HTTPConnection) {
        if remove(connection), connection.wasWebSocket { webSocketCount -= 1 }
        if acceptPausedUntil != nil { resumeAccepting() }  // a descriptor was freed
        stopIfDrained()
    }

    /// Out of descriptors: the listener stays readable, so accepting again at once would
    /// spin. Stop watching it until a connection closes or the pause has passed.
    private func pauseAccepting(errno code: Int32) {
        let until = now + limits.acceptPauseOnEMFILE
        acceptPausedUntil = until
        loop.modify(listenFD, token: listenToken, events: 0)
        acceptTimer = loop.schedule(after: until - now) { [weak self] in self?.resumeAccepting() }
        log("accept_paused", ["errno": String(code), "connections": String(connectionCount)])
    }

    private func resumeAccepting() {
        guard acceptPausedUntil != nil, listenFD >= 0 else { return }
        acceptPausedUntil = nil
        acceptTimer?.cancel()
        acceptTimer = nil
        loop.modify(listenFD, token: listenToken, events: WB_EPOLLIN)
        loop.execute { [unowned self] in self.acceptAll() }
    }

    /// An IPv4 address as dotted text.
    private static func text(of address: in_addr) -> String {
        var buffer = [CChar](repeating: 0, count: Int(INET_ADDRSTRLEN))
        var address = address
        guard inet_ntop(AF_INET, &address, &buffer, socklen_t(buffer.count)) != nil else { return "" }
        return String(cString: buffer)
    }

    func webSocketOpened(_ connection: HTTPConnection) {
        connection.wasWebSocket = true
        webSocketCount += 1
    }

    /// Adds a connection to the front of the list.
    private func insert(_ connection: HTTPConnection) {
        connection.nextInServer = connections
        connections?.previousInServer = connection
        connections = connection
        connectionCount += 1
    }

    /// Takes a connection out of the list; false if it was not in it.
    private func remove(_ connection: HTTPConnection) -> Bool {
        guard connection.previousInServer != nil || connections === connection else { return false }
        let next = connection.nextInServer
        if let previous = connection.previousInServer { previous.nextInServer = next } else { connections = next }
        next?.previousInServer = connection.previousInServer
        connection.nextInServer = nil
        connection.previousInServer = nil
        connectionCount -= 1
        return true
    }

    /// Every open connection (a copy: closing one while walking them is safe).
    private var allConnections: [HTTPConnection] {
        var all: [HTTPConnection] = []
        all.reserveCapacity(connectionCount)
        var next = connections
        while let connection = next {
            all.append(connection)
            next = connection.nextInServer
        }
        return all
    }

    /// A handler task starts (loop thread); `handlerEnded()` once its body has returned.
    func handlerStarted() {
        handlerTasks += 1
    }

    /// A handler task's body has returned (loop thread).
    func handlerEnded() {
        handlerTasks -= 1
        stopIfDrained()
    }

    /// Graceful shutdown (loop thread): stop accepting, close WebSockets with `code`, let
    /// handlers finish until `deadline`, then close everything (which cancels the handlers
    /// left) and stop once every handler task has ended.
    func shutdown(deadline: ContinuousClock.Instant, code: UInt16, reason: String, onStopped: @escaping () -> Void) {
        guard shutdownDeadline == nil else { return }
        shutdownDeadline = deadline
        self.onStopped = onStopped
        shutdownTimer = loop.schedule(after: deadline - now) { [weak self] in
            guard let self else { return }
            for connection in allConnections { connection.close() }
            stopIfDrained()
        }
        if listenFD >= 0 {
            loop.deregister(listenFD, token: listenToken)
            Glibc.close(listenFD)
            listenFD = -1
        }
        for connection in allConnections { connection.drain(code: code, reason: reason) }
        stopIfDrained()
    }

    private func stopIfDrained() {
        guard shutdownDeadline != nil, connections == nil, handlerTasks == 0, let onStopped else { return }
        self.onStopped = nil
        shutdownTimer?.cancel()
        shutdownTimer = nil
        acceptTimer?.cancel()
        acceptTimer = nil
        onStopped()
    }
}

extension HTTPConnection {
    var serverLoop: EventLoop { serverCore.loop }
    var now: ContinuousClock.Instant { serverCore.now }
}
