import Foundation
import JSON
@testable import Relay
import Testing

/// The revision a POST /mcp speaks and the refusals of 2026-07-28, in the order the
/// revision gives them (docs/agents.md, "MCP revisions").
@Suite struct MCPRevisionTests {
    static var meta: [String: JSONValue] { [MCPRevision.protocolVersionKey: "2026-07-28", MCPRevision.clientCapabilitiesKey: [:]] }

    static func choose(_ method: String = "tools/list", params: [String: JSONValue] = ["_meta": .object(meta)], id: JSONValue = 1,
                       version: String? = "2026-07-28", methodHeader: String? = "tools/list",
                       name: String? = nil) -> Result<MCPRevision.Chosen, MCPRevision.Refusal> {
        MCPRevision.choose(method: method, params: params, id: id, versionHeader: version, methodHeader: methodHeader,
                           nameHeader: name)
    }

    static func refusal(_ result: Result<MCPRevision.Chosen, MCPRevision.Refusal>) -> [Int]? {
        if case .failure(let refusal) = result { [refusal.status, refusal.code] } else { nil }
    }

    @Test func theHeaderChoosesTheRevision() throws {
        #expect(try Self.choose(params: [:], version: nil).get().revision == .legacy("2025-03-26"))
        for legacy in MCPRevision.legacyVersions {
            #expect(try Self.choose(params: [:], version: legacy, methodHeader: nil).get().revision == .legacy(legacy))
        }
        #expect(try Self.choose().get().revision == .modern("2026-07-28"))
    }

    @Test func refusalsComeInTheRevisionsOrder() {
        #expect(Self.refusal(Self.choose(params: [:], version: "1999-01-01")) == [400, -32602], "no _meta")
        #expect(Self.refusal(Self.choose(params: ["_meta": [MCPRevision.protocolVersionKey: "2026-07-28"]])) == [400, -32602])
        #expect(Self.refusal(Self.choose(version: "2026-01-01")) == [400, -32020], "header and _meta disagree")
        #expect(Self.refusal(Self.choose(methodHeader: nil)) == [400, -32020])
        #expect(Self.refusal(Self.choose(methodHeader: "Tools/List")) == [400, -32020], "values are case-sensitive")
        var future = Self.meta
        future[MCPRevision.protocolVersionKey] = "2099-01-01"
        #expect(Self.refusal(Self.choose(params: ["_meta": .object(future)], version: "2099-01-01")) == [400, -32022])
        #expect(Self.refusal(Self.choose(id: .null)) == [400, -32600])
        #expect(Self.refusal(Self.choose(id: 1.5)) == [400, -32600])
    }

    @Test func mcpNameIsComparedDecoded() {
        let params: [String: JSONValue] = ["name": "get_phone_location", "_meta": .object(Self.meta)]
        #expect(Self.refusal(Self.choose("tools/call", params: params, methodHeader: "tools/call")) == [400, -32020])
        #expect(Self.refusal(Self.choose("tools/call", params: params, methodHeader: "tools/call", name: "other")) == [400, -32020])
        #expect(Self.refusal(Self.choose("tools/call", params: params, methodHeader: "tools/call", name: "get_phone_location")) == nil)
        let encoded = "=?base64?" + Data("get_phone_location".utf8).base64EncodedString() + "?="
        #expect(Self.refusal(Self.choose("tools/call", params: params, methodHeader: "tools/call", name: encoded)) == nil)
        #expect(MCPRevision.decodedName("=?base64?!!!?=") == nil)
    }

    @Test func traceparentIsKeptOnlyWhenWellFormed() throws {
        let good = "00-0af7651916cd43dd8448eb211c80319c-00f067aa0ba902b7-01"
        var meta = Self.meta
        meta["traceparent"] = .string(good)
        #expect(try Self.choose(params: ["_meta": .object(meta)]).get().traceparent == good)
        for bad in ["00-00000000000000000000000000000000-00f067aa0ba902b7-01", "ff-0af7651916cd43dd8448eb211c80319c-00f067aa0ba902b7-01",
                    "00-0AF7651916CD43DD8448EB211C80319C-00f067aa0ba902b7-01", "junk", good + "-x"] {
            #expect(MCPRevision.traceparent(bad) == nil, "\(bad)")
        }
    }
}
