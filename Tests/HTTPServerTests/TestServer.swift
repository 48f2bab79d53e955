import Foundation
import HTTPServer
import Loop
import Synchronization

/// An in-process server for conformance tests, with a few routes.
final class TestServer: Sendable {
    let server: HTTPServer
    let port: Int

    /// The loop the server runs on, when the test chose its clock (else the server's own).
    let loop: EventLoop?

    init(limits: HTTPServerLimits = HTTPServerLimits(), trustedProxies: TrustedProxies = .none, clock: LoopClock? = nil) throws {
        let box = CounterBox()
        loop = try clock.map { try EventLoop.start(name: "test-server", clock: $0) }
        server = HTTPServer(port: 0, limits: limits, trustedProxies: trustedProxies, loop: loop) { request in
            box.handled.add(1, ordering: .relaxed)
            switch request.path {
            case "/echo":
                return HTTPResponse(status: 200, body: request.body)
            case "/sleep":
                let ms = Int(request.queryItem("ms") ?? "0") ?? 0
                // Counted where the server cancels the task (its loop thread calls onCancel),
                // not where the task next runs: after a sleep it resumes on the concurrency
                // pool, which other tests may keep busy for seconds.
                return await withTaskCancellationHandler {
                    do {
                        // Real time: a slow handler, which the server must wait for, or cancel
                        // when its client hangs up.
                        try await Task.sleep(for: .milliseconds(ms))
                    } catch {
                        return .text(499, "cancelled")
                    }
                    return .text(200, "slept \(ms)")
                } onCancel: {
                    box.cancelled.add(1, ordering: .relaxed)
                }
            case "/stream":
                return .streaming(headers: ["Content-Type": "text/event-stream"]) { body in
                    for n in 1...3 {
                        body.write("data: \(n)\n\n")
                        // Real time: each event leaves in a write of its own, as a slow producer's would.
                        try? await Task.sleep(for: .milliseconds(50))
                    }
                }
            case "/client":
                return .text(200, request.remoteAddress)
            case "/ws-deny":
                return .text(401, "no", headers: ["WWW-Authenticate": "Bearer realm=\"test\""])
            case "/ws":
                guard request.isWebSocketUpgrade else { return .text(426, "upgrade required") }
                return .webSocket { socket in
                    for await message in socket.messages {
                        switch message {
                        case .text(let text) where text.hasPrefix("deadline "):
                            // "deadline MS CODE REASON" sets the close deadline, "deadline off" clears it.
                            let parts = text.split(separator: " ", maxSplits: 3)
                            if parts.count == 4, let ms = Int(parts[1]), let code = UInt16(parts[2]) {
                                socket.close(after: .milliseconds(ms), code: code, reason: String(parts[3]))
                            } else {
                                socket.close(after: nil, code: 1000, reason: "")
                            }
                            socket.send("ok")
                        case .text(let text) where text.hasPrefix("close "):
                            let parts = text.split(separator: " ", maxSplits: 2)
                            socket.close(code: UInt16(parts[1]) ?? 1000, reason: parts.count > 2 ? String(parts[2]) : "")
                        case .text(let text): socket.send(text)
                        case .binary(let bytes): socket.send(binary: bytes)
                        }
                    }
                }
            default:
                return .text(200, "\(request.method) \(request.target)")
            }
        }
        port = try server.start()
        self.box = box
    }

    let box: CounterBox

    final class CounterBox: Sendable {
        let handled = Atomic<Int>(0)
        let cancelled = Atomic<Int>(0)
    }

    func stop() async {
        guard let loop else { return await server.shutdown(drainTimeout: .seconds(1)) }
        // On a manual clock the drain deadline passes only when the test moves time.
        async let stopped: Void = server.shutdown(drainTimeout: .seconds(1))
        await loop.advance(by: .seconds(1))
        await stopped
        loop.stop()
    }
}
