import Foundation
import JSON

/// Whether a tool call asked for progress over an event stream: the client's progress token
/// and its Accept header, read defensively (fuzzed by `Fuzz/MCPRequestFuzz.swift`).
enum MCPProgressRequest {
    /// The client's progress token (`params._meta.progressToken`: a string or a number).
    static func token(_ params: [String: JSONValue]) -> JSONValue? {
        guard let token = params["_meta"]?["progressToken"] else { return nil }
        if let text = token.string, text.utf8.count <= 256 { return token }
        if token.number != nil { return token }
        return nil
    }

    /// Whether the client accepts `text/event-stream` (MCP clients send it beside JSON).
    static func acceptsEventStream(_ accept: String?) -> Bool {
        (accept ?? "").split(separator: ",").contains {
            // `split` drops empty pieces: ";q=1" has no media type at all.
            ($0.split(separator: ";").first ?? "").trimmingCharacters(in: .whitespaces).lowercased() == "text/event-stream"
        }
    }
}
