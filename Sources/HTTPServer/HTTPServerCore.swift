import CSystem
import Glibc

/// The server's state on its loop thread: the listening socket, the connections, and
/// graceful shutdown.
final class HTTPServerCore: @unchecked Sendable {
    let loop: EventLoop
    let limits: HTTPServerLimits
    let handler: HTTPHandler
    /// One read buffer shared by every connection of the loop (reads never overlap).
    var scratch = [UInt8](repeating: 0, count: 64 * 1024)
    /// The time of the current loop iteration.
    private(set) var now = ContinuousClock.now
    private var listenFD: Int32 = -1
    private var listenToken: UInt64 = .max
    private var connections: [UInt64: HTTPConnection] = [:]
    private(set) var webSocketCount = 0
    private var shutdownDeadline: ContinuousClock.Instant?
    private var onStopped: (() -> Void)?

    init(loop: EventLoop, limits: HTTPServerLimits, handler: @escaping HTTPHandler) {
        self.loop = loop
        self.limits = limits
        self.handler = handler
        loop.onTick = { [unowned self] in self.tick() }
        loop.onEvent = { [unowned self] token, events in
            if token == self.listenToken { self.acceptAll() } else { self.connections[token]?.handle(events: events) }
        }
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

    /// Starts accepting (loop thread).
    func startAccepting() throws {
        listenToken = try loop.register(listenFD, events: WB_EPOLLIN)
    }

    /// The listening socket is readable: accept every waiting connection.
    private func acceptAll() {
        now = ContinuousClock.now
        while listenFD >= 0 {
            let fd = wb_accept(listenFD, nil, nil)
            if fd < 0 { return }
            if connections.count >= limits.maxConnections || shutdownDeadline != nil {
                Glibc.close(fd)
                continue
            }
            var yes: Int32 = 1
            setsockopt(fd, Int32(IPPROTO_TCP), TCP_NODELAY, &yes, socklen_t(MemoryLayout<Int32>.size))
            let connection = HTTPConnection(fd: fd, server: self, now: now)
            do {
                try connection.register()
                connections[connection.token] = connection
            } catch {
                Glibc.close(fd)
            }
        }
    }

    func connectionClosed(_ connection: HTTPConnection) {
        if connections.removeValue(forKey: connection.token) != nil, connection.wasWebSocket {
            webSocketCount -= 1
        }
        stopIfDrained()
    }

    func webSocketOpened(_ connection: HTTPConnection) {
        connection.wasWebSocket = true
        webSocketCount += 1
    }

    var connectionCount: Int { connections.count }

    private func tick() {
        now = ContinuousClock.now
        for connection in Array(connections.values) { connection.tick(now: now) }
        if let deadline = shutdownDeadline, now >= deadline {
            for connection in Array(connections.values) { connection.close() }
            stopIfDrained()
        }
    }

    /// Graceful shutdown (loop thread): stop accepting, close WebSockets with `code`, let
    /// handlers finish until `deadline`, then close everything and stop the loop.
    func shutdown(deadline: ContinuousClock.Instant, code: UInt16, reason: String, onStopped: @escaping () -> Void) {
        guard shutdownDeadline == nil else { return }
        shutdownDeadline = deadline
        self.onStopped = onStopped
        if listenFD >= 0 {
            loop.deregister(listenFD)
            Glibc.close(listenFD)
            listenFD = -1
        }
        for connection in Array(connections.values) { connection.drain(code: code, reason: reason) }
        stopIfDrained()
    }

    private func stopIfDrained() {
        guard shutdownDeadline != nil, connections.isEmpty, let onStopped else { return }
        self.onStopped = nil
        loop.stop()
        onStopped()
    }
}

extension HTTPConnection {
    var serverLoop: EventLoop { serverCore.loop }
    var now: ContinuousClock.Instant { serverCore.now }
}
