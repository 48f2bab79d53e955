import Foundation
import JSON
@testable import Relay
import Testing

/// When a tool call is answered over SSE with progress.
@Suite struct MCPProgressTests {
    @Test func progressTokens() {
        #expect(MCPProgressRequest.token(["_meta": ["progressToken": "abc"]]) == "abc")
        #expect(MCPProgressRequest.token(["_meta": ["progressToken": 7]]) == 7)
        #expect(MCPProgressRequest.token(["_meta": ["progressToken": true]]) == nil, "a boolean is not a token")
        #expect(MCPProgressRequest.token(["_meta": ["progressToken": .number(.infinity)]]) == nil, "nor a number without a value")
        #expect(MCPProgressRequest.token(["_meta": ["progressToken": .string(String(repeating: "x", count: 257))]]) == nil)
        #expect(MCPProgressRequest.token(["_meta": [:]]) == nil)
        #expect(MCPProgressRequest.token([:]) == nil)
    }

    @Test func eventStreamAcceptance() {
        #expect(MCPProgressRequest.acceptsEventStream("application/json, text/event-stream"))
        #expect(MCPProgressRequest.acceptsEventStream("Text/Event-Stream;q=0.9"))
        #expect(!MCPProgressRequest.acceptsEventStream("application/json"))
        #expect(!MCPProgressRequest.acceptsEventStream(nil))
        #expect(!MCPProgressRequest.acceptsEventStream("text/event-streamer"))
        #expect(!MCPProgressRequest.acceptsEventStream("application/json,;,;q=1"), "pieces without a media type (\";\" used to trap)")
    }
}
