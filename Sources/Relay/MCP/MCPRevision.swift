import Foundation
import JSON

/// The MCP revision one POST /mcp speaks, chosen per request (the relay is stateless in
/// every revision), and the checks of its envelope — fuzzed with the body by
/// `Fuzz/MCPRequestFuzz.swift`.
///
/// - No `MCP-Protocol-Version` header: 2025-03-26, as 2025-06-18 and later say to assume.
/// - A header naming 2025-03-26, 2025-06-18 or 2025-11-25: that legacy revision
///   (`initialize`, results without `resultType`).
/// - Any other header (2026-07-28, a version nobody speaks, junk): 2026-07-28's rules, in
///   its order — `params._meta` must carry the protocol version and the client's
///   capabilities (else 400, -32602), the headers must agree with the body
///   (`MCP-Protocol-Version` with `_meta`, `Mcp-Method` with `method`, `Mcp-Name` with the
///   tool's name; else 400, -32020), and the version must be one this server speaks (else
///   400, -32022 with the supported versions). Request ids must be strings or integers.
enum MCPRevision: Equatable, Sendable {
    /// 2025-03-26, 2025-06-18 or 2025-11-25.
    case legacy(String)
    /// 2026-07-28: per-request `_meta`, standard headers, `resultType` on every result.
    case modern(String)

    /// The stateless revisions this server speaks.
    static let modernVersions = ["2026-07-28"]
    /// The handshake revisions this server speaks, newest first.
    static let legacyVersions = ["2025-11-25", "2025-06-18", "2025-03-26"]
    /// Every revision, newest first (`server/discover`'s `supportedVersions`).
    static var supported: [String] { modernVersions + legacyVersions }
    /// What a request without `MCP-Protocol-Version` speaks.
    static let assumedWithoutHeader = "2025-03-26"

    /// The `_meta` keys of 2026-07-28.
    static let protocolVersionKey = "io.modelcontextprotocol/protocolVersion"
    static let clientCapabilitiesKey = "io.modelcontextprotocol/clientCapabilities"
    static let serverInfoKey = "io.modelcontextprotocol/serverInfo"
    /// The tasks extension of 2026-07-28 (SEP-2663).
    static let tasksExtension = "io.modelcontextprotocol/tasks"
    /// Where 2025-11-25 names the task a message belongs to.
    static let relatedTaskKey = "io.modelcontextprotocol/related-task"

    /// Whether a 2026-07-28 request's `_meta` client capabilities declare the tasks extension.
    static func declaresTasks(_ params: [String: JSONValue]) -> Bool {
        params["_meta"]?[clientCapabilitiesKey]?["extensions"]?[tasksExtension] != nil
    }

    /// A request refused before its method runs: the HTTP status and the JSON-RPC error.
    struct Refusal: Error, Sendable {
        let status: Int
        let code: Int
        let message: String
        let data: JSONValue?

        init(_ status: Int, _ code: Int, _ message: String, data: JSONValue? = nil) {
            self.status = status
            self.code = code
            self.message = message
            self.data = data
        }
    }

    /// What a valid request speaks, and its W3C trace context when it sent a well-formed one.
    struct Chosen: Equatable, Sendable {
        let revision: MCPRevision
        let traceparent: String?
    }

    /// The revision of a request, or why it is refused.
    /// - Parameters:
    ///   - versionHeader, methodHeader, nameHeader: `MCP-Protocol-Version`, `Mcp-Method`, `Mcp-Name`.
    static func choose(method: String, params: [String: JSONValue], id: JSONValue, versionHeader: String?,
                       methodHeader: String?, nameHeader: String?) -> Result<Chosen, Refusal> {
        guard let header = versionHeader else { return .success(Chosen(revision: .legacy(assumedWithoutHeader), traceparent: nil)) }
        if legacyVersions.contains(header) { return .success(Chosen(revision: .legacy(header), traceparent: nil)) }
        guard let meta = params["_meta"]?.object, let version = meta[protocolVersionKey]?.string,
              meta[clientCapabilitiesKey]?.object != nil else {
            return .failure(Refusal(400, -32602, "params._meta must carry \(protocolVersionKey) (a string) and \(clientCapabilitiesKey) (an object)."))
        }
        guard header == version else {
            return .failure(Refusal(400, -32020, "The MCP-Protocol-Version header does not match params._meta's protocol version."))
        }
        guard methodHeader == method else {
            return .failure(Refusal(400, -32020, "The Mcp-Method header is missing or does not match the request's method."))
        }
        if method == "tools/call" {
            guard let name = nameHeader.flatMap(decodedName), name == params["name"]?.string else {
                return .failure(Refusal(400, -32020, "The Mcp-Name header is missing or does not match the tool's name."))
            }
        }
        if method.hasPrefix("tasks/"), params["taskId"] != nil {
            // The tasks extension: Mcp-Name carries the task id (SEP-2663).
            guard let name = nameHeader.flatMap(decodedName), name == params["taskId"]?.string else {
                return .failure(Refusal(400, -32020, "The Mcp-Name header is missing or does not match the task id."))
            }
        }
        guard modernVersions.contains(version) else {
            return .failure(Refusal(400, -32022, "Unsupported protocol version",
                                    data: ["supported": .array(supported.map(JSONValue.string)),
                                           "requested": .string(String(version.prefix(64)))]))
        }
        guard id.string != nil || isInteger(id) else {
            return .failure(Refusal(400, -32600, "Request ids must be strings or integers under 2026-07-28."))
        }
        return .success(Chosen(revision: .modern(version), traceparent: meta["traceparent"]?.string.flatMap(traceparent)))
    }

    /// An `Mcp-Name` value: as sent, or decoded from `=?base64?…?=` (strict base64 of UTF-8).
    static func decodedName(_ header: String) -> String? {
        guard header.hasPrefix("=?base64?"), header.hasSuffix("?="), header.utf8.count >= 11 else { return header }
        let encoded = String(header.dropFirst(9).dropLast(2))
        guard let data = Data(base64Encoded: encoded), data.base64EncodedString() == encoded,
              let text = String(data: data, encoding: .utf8) else { return nil }
        return text
    }

    /// A W3C `traceparent` (version-traceid-parentid-flags, lowercase hex, ids not all zero),
    /// or nil: an invalid one is ignored, as W3C Trace Context says.
    static func traceparent(_ value: String) -> String? {
        let parts = value.split(separator: "-", omittingEmptySubsequences: false)
        guard parts.count == 4, parts.map(\.count) == [2, 32, 16, 2], parts[0] != "ff",
              parts.allSatisfy({ $0.allSatisfy { ("0"..."9").contains($0) || ("a"..."f").contains($0) } }),
              parts[1].contains(where: { $0 != "0" }), parts[2].contains(where: { $0 != "0" }) else { return nil }
        return value
    }

    /// Whether a parsed JSON id is an integer (not a fraction, not true or false).
    private static func isInteger(_ value: JSONValue) -> Bool {
        guard let number = value.number else { return false }
        return number == number.rounded()
    }
}
