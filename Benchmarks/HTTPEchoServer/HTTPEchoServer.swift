import Dispatch
import Foundation
import Glibc
import HTTPServer
import Synchronization

/// A small server over HTTPServer for acceptance tests with outside clients (Python
/// `websockets`, curl) and for `make bench-http` (wrk, memory per idle WebSocket).
///
/// Routes: any plain request → 200 "ok"; POST /echo echoes the body; /ws echoes messages
/// ("close CODE REASON" makes the server close); /ws/push registers the socket and
/// POST /push?text=T sends T to every registered socket from the request's task; /ws/idle
/// only holds the socket; /ws/deny answers 401 before the upgrade. SIGTERM: shut down,
/// closing WebSockets with 1012 "restart". Environment: PORT (0 = any; the port is
/// printed), PING_INTERVAL_MS, PONG_TIMEOUT_MS.
@main
struct HTTPEchoServer {
    final class Registry: Sendable {
        let sockets = Mutex<[ObjectIdentifier: WebSocket]>([:])
    }

    /// /ws/idle: holds the socket with no task at all (the delegate API).
    final class IdleDelegate: WebSocketDelegate {
        func webSocketDidOpen(_ socket: WebSocket) {}
        func webSocket(_ socket: WebSocket, didReceive message: WebSocketMessage) {}
        func webSocketDidClose(_ socket: WebSocket, code: UInt16, reason: String) {}
    }

    /// /ws/push: registers the socket on the loop, in the turn that answers the upgrade, so
    /// a client that has its 101 and then asks for /push finds it registered. (A handler task
    /// registered it when it first ran: under load a push could come first and miss it.)
    final class PushDelegate: WebSocketDelegate {
        let registry: Registry
        init(registry: Registry) { self.registry = registry }
        func webSocketDidOpen(_ socket: WebSocket) { registry.sockets.withLock { $0[socket.id] = socket } }
        func webSocket(_ socket: WebSocket, didReceive message: WebSocketMessage) {}
        func webSocketDidClose(_ socket: WebSocket, code: UInt16, reason: String) {
            registry.sockets.withLock { _ = $0.removeValue(forKey: socket.id) }
        }
    }

    static func main() async throws {
        var limit = rlimit()
        getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit)
        limit.rlim_cur = limit.rlim_max
        setrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit)

        let environment = ProcessInfo.processInfo.environment
        var limits = HTTPServerLimits()
        if let ms = environment["PING_INTERVAL_MS"].flatMap(Int.init) { limits.webSocketPingInterval = .milliseconds(ms) }
        if let ms = environment["PONG_TIMEOUT_MS"].flatMap(Int.init) { limits.webSocketPongTimeout = .milliseconds(ms) }
        let registry = Registry()
        let idle = IdleDelegate()
        let pushed = PushDelegate(registry: registry)

        let server = HTTPServer(host: "127.0.0.1", port: Int(environment["PORT"] ?? "0") ?? 0, limits: limits) { request in
            switch request.path {
            case "/echo":
                return HTTPResponse(status: 200, body: request.body)
            case "/push":
                let text = request.queryItem("text") ?? ""
                let sockets = registry.sockets.withLock { Array($0.values) }
                for socket in sockets { socket.send(text) }
                return .text(200, String(sockets.count))
            case "/ws/deny":
                return .text(401, "Missing, unknown, expired or revoked credential.",
                             headers: ["WWW-Authenticate": "Bearer realm=\"echo\""])
            case "/ws/idle":
                guard request.isWebSocketUpgrade else { return .text(426, "upgrade required") }
                return .webSocket(delegate: idle)
            case "/ws/push":
                guard request.isWebSocketUpgrade else { return .text(426, "upgrade required") }
                return .webSocket(delegate: pushed)
            case "/ws":
                guard request.isWebSocketUpgrade else { return .text(426, "upgrade required") }
                return .webSocket { socket in
                    for await message in socket.messages {
                        switch message {
                        case .text(let text) where text.hasPrefix("close "):
                            let parts = text.split(separator: " ", maxSplits: 2)
                            socket.close(code: UInt16(parts[1]) ?? 1000, reason: parts.count > 2 ? String(parts[2]) : "")
                        case .text(let text): socket.send(text)
                        case .binary(let bytes): socket.send(binary: bytes)
                        }
                    }
                }
            default:
                return .text(200, "ok")
            }
        }
        let port = try server.start()
        FileHandle.standardOutput.write(Data("listening on \(port)\n".utf8))

        let termination = SignalHandler.on(SIGTERM) {
            Task { await server.shutdown(drainTimeout: .seconds(5), webSocketCloseCode: 1012, reason: "restart") }
        }
        await server.run()
        termination.cancel()
    }
}
