import Foundation
@testable import Push
import Testing

/// The responses of docs/protocol.md, "APNs" and "Web Push", the endpoint allow-list and
/// apns-id.
@Suite struct PushResponseTests {
    private func apns(_ status: Int?, _ reason: String? = nil, timestamp: Int? = nil) -> PushHTTPResponse {
        var body = ""
        if let reason { body = #"{"reason":"\#(reason)""# + (timestamp.map { #","timestamp":\#($0)"# } ?? "") + "}" }
        return PushHTTPResponse(status: status, body: Array(body.utf8), httpVersion: 2)
    }

    /// Every APNs answer maps to its action.
    @Test func apnsResponseTable() {
        let table: [(PushHTTPResponse, APNsResponse.Action)] = [
            (apns(200), .result(.sent)),
            (apns(400, "BadDeviceToken"), .result(.dropped)),
            (apns(400, "DeviceTokenNotForTopic"), .result(.dropped)),
            (apns(410, "Unregistered", timestamp: 1_796_000_000_000), .result(.dropped)),
            (apns(410, "ExpiredToken"), .result(.dropped)),
            (apns(403, "ExpiredProviderToken"), .expiredProviderToken),
            (apns(403, "InvalidProviderToken"), .result(.authError)),
            (apns(403, "BadTopic"), .result(.authError)),
            (apns(403, "TopicDisallowed"), .result(.authError)),
            (apns(413, "PayloadTooLarge"), .result(.rejected)),
            (apns(400, "BadCollapseId"), .result(.rejected)),
            (apns(429, "TooManyRequests"), .result(.throttled)),
            (apns(429, "TooManyProviderTokenUpdates"), .result(.authError)),
            (apns(500, "InternalServerError"), .retry),
            (apns(503, "ServiceUnavailable"), .retry),
            (apns(503, "Shutdown"), .retry),
            (apns(nil), .retry),
        ]
        for (response, action) in table {
            #expect(APNsResponse.action(response) == action, "\(String(describing: response.status)) \(String(decoding: response.body, as: UTF8.self))")
        }
    }

    /// A 410's timestamp is milliseconds since the epoch.
    @Test func apnsUnregisteredTimestampIsMilliseconds() {
        let delivery = APNsResponse.delivery(apns(410, "Unregistered", timestamp: 1_796_000_000_123), result: .dropped)
        #expect(delivery.unregisteredAt == Date(timeIntervalSince1970: 1_796_000_000.123))
        #expect(delivery.reason == "Unregistered")
        #expect(APNsResponse.delivery(apns(410, "Unregistered", timestamp: -5), result: .dropped).unregisteredAt == nil)
        // A reason that is not one word is not echoed into logs.
        #expect(APNsResponse.delivery(apns(400, "Bad token abc123"), result: .rejected).reason == "HTTP 400")
    }

    /// Web Push answers: only 404 and 410 drop a subscription.
    @Test func webPushResponseTable() {
        let table: [(Int?, PushResult)] = [
            (201, .sent), (200, .sent), (202, .sent), (404, .dropped), (410, .dropped), (413, .rejected),
            (429, .throttled), (400, .authError), (401, .authError), (403, .authError), (500, .error), (503, .error),
            (nil, .error), (301, .rejected),
        ]
        for (status, result) in table { #expect(WebPushResponse.result(status) == result, "\(String(describing: status))") }
        #expect(WebPushResponse.retryAfter("3") == 3)
        #expect(WebPushResponse.retryAfter("Wed, 21 Oct 2015 07:28:00 GMT") == nil)
        #expect(WebPushResponse.retryAfter("100000") == nil)
    }

    /// The endpoint allow-list (SSRF guard).
    @Test func endpointAllowList() {
        for good in ["https://fcm.googleapis.com/fcm/send/x", "https://updates.push.services.mozilla.com/wpush/v2/x",
                     "https://web.push.apple.com/QGu", "https://wns2-par02p.notify.windows.com/w/?token=x"] {
            #expect(WebPushSender.isAllowed(endpoint: good), "\(good)")
        }
        for bad in ["http://fcm.googleapis.com/x", "https://evil.example/x", "https://googleapis.com.evil.example/x",
                    "https://127.0.0.1:8443/x", "https://fcm.googleapis.com:8443/x", "https://user@fcm.googleapis.com/x",
                    "https://169.254.169.254/latest", "not a url"] {
            #expect(!WebPushSender.isAllowed(endpoint: bad), "\(bad)")
        }
        #expect(WebPushSender.isAllowed(endpoint: "https://127.0.0.1:8443/sub/1", extraOrigins: ["https://127.0.0.1:8443"]))
    }

    /// apns-id is deterministic per (request, stage, token), a version-4-shaped UUID.
    @Test func apnsIDIsDeterministic() throws {
        let one = APNsSender.notificationID("9b2d…", "wake", "aa")
        #expect(one == APNsSender.notificationID("9b2d…", "wake", "aa"))
        #expect(one != APNsSender.notificationID("9b2d…", "checking", "aa"))
        let uuid = try #require(UUID(uuidString: one))
        #expect(uuid.uuidString == one)
        let characters = Array(one)
        #expect(characters[14] == "4")
        #expect("89AB".contains(characters[19]))
        #expect(pushTargetFingerprint("abc").count == 8)
    }
}
