import Foundation
import HTTPServer

/// A tool call answered over Server-Sent Events with progress notifications (MCP
/// Streamable HTTP): many clients give up on a tool call after 60 s unless progress arrives,
/// and a person may take longer than that to tap. The call's own response ends the stream;
/// a client that goes away cancels the call (the request is abandoned).
enum MCPProgress {
    /// How often progress is reported while the person has not answered.
    static let defaultInterval: Duration = .seconds(15)

    /// The request, carried into the streaming task (JSON values from JSONSerialization are
    /// immutable Foundation objects).
    struct Call: @unchecked Sendable {
        let id: Any
        let method: String
        let params: [String: Any]
        let token: Any
    }

    /// Runs `respond` and streams progress every `interval` until its response, which ends
    /// the stream. Cancelled (the client left) → `respond`'s task is cancelled too.
    static func stream(_ call: Call, every interval: Duration, to body: HTTPResponseStream,
                       _ respond: @escaping @Sendable (Call) async -> [String: Any]) async {
        enum Event: Sendable { case tick, done([UInt8]) }
        let (events, continuation) = AsyncStream<Event>.makeStream(bufferingPolicy: .bufferingNewest(4))
        let work = Task {
            continuation.yield(.done(MCPHandler.json(await respond(call))))
            continuation.finish()
        }
        let ticks = Task {
            while !Task.isCancelled {
                continuation.yield(.tick)
                try? await Task.sleep(for: interval)
            }
        }
        defer { ticks.cancel() }
        var progress = 0
        for await event in events {
            switch event {
            case .tick:
                let notification: [String: Any] = [
                    "jsonrpc": "2.0", "method": "notifications/progress",
                    "params": ["progressToken": call.token, "progress": progress,
                               "message": "Waiting for the person to answer on their phone."]]
                body.write("data: " + String(decoding: MCPHandler.json(notification), as: UTF8.self) + "\n\n")
                progress += 1
            case .done(let response):
                body.write(Array("data: ".utf8) + response + Array("\n\n".utf8))
                return
            }
        }
        work.cancel()  // the stream ended without a response: the client went away
    }
}
