import Foundation
import HTTPServer
import JSON

/// A tool call answered over Server-Sent Events with progress notifications (MCP
/// Streamable HTTP): many clients give up on a tool call after 60 s unless progress arrives,
/// and a person may take longer than that to tap. The call's own response ends the stream;
/// a client that goes away cancels the call (the request is abandoned).
enum MCPProgress {
    /// How often progress is reported while the person has not answered.
    static let defaultInterval: Duration = .seconds(15)

    /// The request, carried into the streaming task.
    struct Call: Sendable {
        let id: JSONValue
        let method: String
        let params: [String: JSONValue]
        let token: JSONValue
    }

    /// Runs `respond` and streams progress every `interval` until its response, which ends
    /// the stream. Cancelled (the client left) → `respond`'s task is cancelled too.
    static func stream(_ call: Call, every interval: Duration, to body: HTTPResponseStream,
                       _ respond: @escaping @Sendable (Call) async -> JSONValue) async {
        enum Event: Sendable { case tick, done([UInt8]) }
        let (events, continuation) = AsyncStream<Event>.makeStream(bufferingPolicy: .bufferingNewest(4))
        await withTaskGroup(of: Void.self) { group in
            // Child tasks of this call: the call's work, which ends with its response (or is
            // cancelled with this task when the client went away), and the ticks, cancelled
            // once the stream ends; both are awaited before this returns.
            group.addTask {
                continuation.yield(.done(await respond(call).bytes))
                continuation.finish()
            }
            group.addTask {
                while !Task.isCancelled {
                    continuation.yield(.tick)
                    try? await Task.sleep(for: interval)
                }
            }
            defer { group.cancelAll() }  // the response came, or the client went away
            var progress = 0
            for await event in events {
                switch event {
                case .tick:
                    let notification: JSONValue = [
                        "jsonrpc": "2.0", "method": "notifications/progress",
                        "params": ["progressToken": call.token, "progress": JSONValue(progress),
                                   "message": "Waiting for the person to answer on their phone."]]
                    body.write("data: " + notification.text + "\n\n")
                    progress += 1
                case .done(let response):
                    body.write(Array("data: ".utf8) + response + Array("\n\n".utf8))
                    return
                }
            }
        }
    }
}
