import Foundation

/// One JSON-RPC 2.0 message from an MCP client's POST body, decoded defensively (fuzzed by
/// `Fuzz/MCPRequestFuzz.swift`): a request (with an id), a notification (without), or the
/// JSON-RPC error that refuses the body. What is valid is JSON-RPC 2.0 §4, as
/// docs/openapi.yaml's `JSONRPCMessage` describes it: an object with `jsonrpc` "2.0", `method` a
/// non-empty string (at most `maximumMethodLength` characters), `params` absent or an object
/// or array (never null), `id` absent (a notification) or a string, number or null.
enum JSONRPCMessage {
    /// A call that wants an answer; `id` is a string, number or null, echoed back as given.
    /// By-position params (an array) reach the method as no named params: no MCP method takes
    /// them, so a tools/call with an array is answered -32602 like one without a name.
    case request(id: Any, method: String, params: [String: Any])
    /// A notification (no id): answered 202 with no body.
    case notification(method: String)
    /// The body is refused: its JSON-RPC error code and message (HTTP 400).
    case invalid(code: Int, message: String)

    /// The longest method name accepted, in characters (Unicode scalars, as JSON Schema's
    /// maxLength counts them).
    static let maximumMethodLength = 256

    /// Decodes a POST body.
    static func decode(_ body: [UInt8]) -> JSONRPCMessage {
        // Any JSON text parses (a bare 1 or "x" is JSON, just not a request: -32600, as §7 shows).
        guard let json = try? JSONSerialization.jsonObject(with: Data(body), options: [.fragmentsAllowed]) else {
            return .invalid(code: -32700, message: "Parse error")
        }
        if json is [Any] { return .invalid(code: -32600, message: "Batches are not supported.") }
        let invalid = JSONRPCMessage.invalid(code: -32600, message: "Invalid Request")
        guard let message = json as? [String: Any], message["jsonrpc"] as? String == "2.0",
              let method = message["method"] as? String, !method.isEmpty,
              method.unicodeScalars.count <= maximumMethodLength else {
            return invalid
        }
        // "params" may be omitted; when present it is a structured value (§4.2): `null`, a
        // string or a number is not.
        var params: [String: Any] = [:]
        if let value = message["params"] {
            if let named = value as? [String: Any] { params = named } else if !(value is [Any]) { return invalid }
        }
        guard let id = message["id"] else { return .notification(method: method) }
        // A string, a number or null (§4); anything else, true and false included, cannot be
        // echoed back as the client's id.
        guard id is String || id is NSNull || isNumber(id) else { return invalid }
        return .request(id: id, method: method, params: params)
    }

    /// Whether a parsed JSON value is a number (Foundation parses true and false as NSNumbers
    /// whose type is "c").
    private static func isNumber(_ value: Any) -> Bool {
        guard let number = value as? NSNumber else { return false }
        return String(cString: number.objCType) != "c"
    }
}
