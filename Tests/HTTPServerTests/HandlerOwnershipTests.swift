import HTTPServer
import Synchronization
import Testing
import TestSupport

/// The server owns its handler tasks: a shutdown cancels those left at its deadline and
/// returns only once every one has ended, a request's and a WebSocket consumer's alike.
@Suite struct HandlerOwnershipTests {
    /// A handler that holds on past its cancellation until the test lets it go.
    final class Holder: Sendable {
        private let held = Mutex<[CheckedContinuation<Void, Never>]>([])
        let cancelled = Atomic<Int>(0)
        let ended = Atomic<Int>(0)

        var waiting: Int { held.withLock { $0.count } }

        func hold() async {
            await withTaskCancellationHandler {
                await withCheckedContinuation { continuation in held.withLock { $0.append(continuation) } }
            } onCancel: {
                cancelled.add(1, ordering: .relaxed)
            }
            ended.add(1, ordering: .relaxed)
        }

        func release() {
            held.withLock { held in
                held.forEach { $0.resume() }
                held = []
            }
        }
    }

    @Test func shutdownWaitsForEveryHandlerTask() async throws {
        let holder = Holder()
        let server = HTTPServer(port: 0) { request in
            if request.path == "/ws" {
                return .webSocket { socket in
                    socket.send("hello")
                    for await _ in socket.messages {}
                    await holder.hold()  // the socket closed; the consumer lingers
                }
            }
            await holder.hold()
            return .text(200, "late")
        }
        let port = try server.start()
        let client = try await RawClient.connect(port: port)
        client.send("GET /slow HTTP/1.1\r\nHost: x\r\n\r\n")
        let socket = try await WebSocketClient.connect("ws://127.0.0.1:\(port)/ws")
        var messages = socket.messages.makeAsyncIterator()
        _ = await messages.next()
        try await eventually("the request's handler holds on") { holder.waiting == 1 }

        let stopped = Atomic<Bool>(false)
        let stopping = Task {
            await server.shutdown(drainTimeout: .milliseconds(50))
            stopped.store(true, ordering: .relaxed)
        }
        try await eventually("the deadline closed every connection and cancelled the request's handler") {
            await server.connectionCounts().connections == 0 && holder.cancelled.load(ordering: .relaxed) == 1
                && holder.waiting == 2
        }
        let stoppedEarly = stopped.load(ordering: .relaxed)
        #expect(!stoppedEarly, "the server has not stopped while two handler tasks run")
        holder.release()
        await stopping.value
        let ended = holder.ended.load(ordering: .relaxed)
        #expect(ended == 2)
        _ = client
    }
}
