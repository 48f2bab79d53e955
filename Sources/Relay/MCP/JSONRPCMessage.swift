import JSON

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
    case request(id: JSONValue, method: String, params: [String: JSONValue])
    /// A notification (no id): answered 202 with no body (`notifications/cancelled` withdraws
    /// the call it names).
    case notification(method: String, params: [String: JSONValue])
    /// The body is refused: its JSON-RPC error code and message (HTTP 400).
    case invalid(code: Int, message: String)

    /// The longest method name accepted, in characters (Unicode scalars, as JSON Schema's
    /// maxLength counts them).
    static let maximumMethodLength = 256

    /// Decodes a POST body.
    static func decode(_ body: [UInt8]) -> JSONRPCMessage {
        // Any JSON text parses (a bare 1 or "x" is JSON, just not a request: -32600, as §7 shows).
        guard let json = JSONValue.parse(bytes: body) else { return .invalid(code: -32700, message: "Parse error") }
        if json.array != nil { return .invalid(code: -32600, message: "Batches are not supported.") }
        let invalid = JSONRPCMessage.invalid(code: -32600, message: "Invalid Request")
        guard let message = json.object, message["jsonrpc"]?.string == "2.0",
              let method = message["method"]?.string, !method.isEmpty,
              method.unicodeScalars.count <= maximumMethodLength else {
            return invalid
        }
        // "params" may be omitted; when present it is a structured value (§4.2): `null`, a
        // string or a number is not.
        var params: [String: JSONValue] = [:]
        if let value = message["params"] {
            if let named = value.object { params = named } else if value.array == nil { return invalid }
        }
        guard let id = message["id"] else { return .notification(method: method, params: params) }
        // A string, a number or null (§4); anything else, true and false included, cannot be
        // echoed back as the client's id.
        // A number must be finite to be echoed (1e400 parses, but has no value).
        guard id.string != nil || id.isNull || id.number != nil else { return invalid }
        return .request(id: id, method: method, params: params)
    }
}
