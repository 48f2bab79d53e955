import Push
import Testing

/// Web Push endpoints are parsed once, strictly, and the allow-list compares what was
/// parsed (`127.0.0.1%2f.googleapis.com` passed an older check, and only libcurl refused it).
@Suite struct PushEndpointTests {
    @Test(arguments: ["https://fcm.googleapis.com/fcm/send/abc:DEF-123_x",
                      "https://updates.push.services.mozilla.com/wpush/v2/gAAAA%3D%3D",
                      "https://web.push.apple.com/QGuQyavXutnMH8?x=1", "HTTPS://FCM.GoogleAPIs.com/fcm/send/a"])
    func realEndpointsAreAllowed(endpoint: String) {
        #expect(PushEndpoint(endpoint) != nil)
        #expect(WebPushSender.isAllowed(endpoint: endpoint))
    }

    @Test(arguments: ["https://127.0.0.1%2f.googleapis.com/x", "https://127.0.0.1%2F.googleapis.com/x",
                      "https://a@fcm.googleapis.com/x", "https://fcm.googleapis.com:443/x", "http://fcm.googleapis.com/x",
                      "https://evil.com\\.googleapis.com/", "https://[::1].googleapis.com/", "https://fcm.googleapis.com/x#y",
                      "https://fcm.googleapis.com/a b", "https://fcm.googleapis.com/%zz", "https://-x.googleapis.com/",
                      "https://fcm..googleapis.com/", "https://fcm.googleapis.com.evil.com/", "https://googleapis.com/",
                      "https://fcm.googleapis.com:0/", "https://fcm.googleapis.com:99999/", "https:///x", "https://"])
    func everythingElseIsRefused(endpoint: String) {
        #expect(!WebPushSender.isAllowed(endpoint: endpoint))
    }

    @Test func extraOriginsMatchTheParsedOrigin() {
        #expect(WebPushSender.isAllowed(endpoint: "https://127.0.0.1:8443/push/1", extraOrigins: ["https://127.0.0.1:8443"]))
        #expect(!WebPushSender.isAllowed(endpoint: "https://127.0.0.1:8444/push/1", extraOrigins: ["https://127.0.0.1:8443"]))
        #expect(PushEndpoint("https://Push.Example:8443/x")?.origin == "https://push.example:8443")
        #expect(PushEndpoint("https://x.example/" + String(repeating: "a", count: 2048)) == nil, "over 2048 bytes")
    }
}
