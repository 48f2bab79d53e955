import Foundation

/// One JSON-RPC 2.0 message from an MCP client's POST body, decoded defensively (fuzzed by
/// `Fuzz/MCPRequestFuzz.swift`): a request (with an id), a notification (without), or the
/// JSON-RPC error that refuses the body.
enum JSONRPCMessage {
    /// A call that wants an answer; `id` is a string or number, echoed back as given.
    case request(id: Any, method: String, params: [String: Any])
    /// A notification (no id): answered 202 with no body.
    case notification(method: String)
    /// The body is refused: its JSON-RPC error code and message (HTTP 400).
    case invalid(code: Int, message: String)

    /// Decodes a POST body.
    static func decode(_ body: [UInt8]) -> JSONRPCMessage {
        guard let json = try? JSONSerialization.jsonObject(with: Data(body)) else {
            return .invalid(code: -32700, message: "Parse error")
        }
        if json is [Any] { return .invalid(code: -32600, message: "Batches are not supported.") }
        guard let message = json as? [String: Any], message["jsonrpc"] as? String == "2.0",
              let method = message["method"] as? String, method.utf8.count <= 256 else {
            return .invalid(code: -32600, message: "Invalid Request")
        }
        guard let id = message["id"], !(id is NSNull) else { return .notification(method: method) }
        // JSON-RPC ids are strings or numbers; anything else cannot be echoed safely.
        guard id is String || id is NSNumber else { return .invalid(code: -32600, message: "Invalid Request") }
        if let params = message["params"], !(params is NSNull), !(params is [String: Any]) {
            return .invalid(code: -32600, message: "Invalid Request")
        }
        return .request(id: id, method: method, params: message["params"] as? [String: Any] ?? [:])
    }
}
