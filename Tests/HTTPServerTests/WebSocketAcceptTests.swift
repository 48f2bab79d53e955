import HTTPServer
import Testing

/// The handshake hash matches RFC 6455's worked example.
@Suite struct WebSocketAcceptTests {
    /// RFC 6455 §1.3: key "dGhlIHNhbXBsZSBub25jZQ==" gives "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=".
    @Test func matchesTheRFCExample() {
        #expect(WebSocketAccept.value(forKey: "dGhlIHNhbXBsZSBub25jZQ==") == "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=")
    }
}
