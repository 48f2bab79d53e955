import Foundation
@testable import Relay
import Testing

/// When a tool call is answered over SSE with progress.
@Suite struct MCPProgressTests {
    @Test func progressTokens() {
        #expect(MCPProgressRequest.token(["_meta": ["progressToken": "abc"]]) as? String == "abc")
        #expect(MCPProgressRequest.token(["_meta": ["progressToken": 7]]) as? NSNumber == 7)
        #expect(MCPProgressRequest.token(["_meta": ["progressToken": true]]) == nil, "a boolean is not a token")
        #expect(MCPProgressRequest.token(["_meta": ["progressToken": String(repeating: "x", count: 257)]]) == nil)
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
