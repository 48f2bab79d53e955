import Foundation
@testable import Relay
import Testing

/// When a tool call is answered over SSE with progress.
@Suite struct MCPProgressTests {
    @Test func progressTokens() {
        #expect(MCPProgress.token(["_meta": ["progressToken": "abc"]]) as? String == "abc")
        #expect(MCPProgress.token(["_meta": ["progressToken": 7]]) as? NSNumber == 7)
        #expect(MCPProgress.token(["_meta": ["progressToken": true]]) == nil, "a boolean is not a token")
        #expect(MCPProgress.token(["_meta": ["progressToken": String(repeating: "x", count: 257)]]) == nil)
        #expect(MCPProgress.token(["_meta": [:]]) == nil)
        #expect(MCPProgress.token([:]) == nil)
    }

    @Test func eventStreamAcceptance() {
        #expect(MCPProgress.acceptsEventStream("application/json, text/event-stream"))
        #expect(MCPProgress.acceptsEventStream("Text/Event-Stream;q=0.9"))
        #expect(!MCPProgress.acceptsEventStream("application/json"))
        #expect(!MCPProgress.acceptsEventStream(nil))
        #expect(!MCPProgress.acceptsEventStream("text/event-streamer"))
    }
}
