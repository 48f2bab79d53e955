import Crypto
import Foundation

/// Sends RFC 8030 Web Push messages: RFC 8291 encryption, RFC 8292 VAPID, and the
/// responses of docs/protocol.md, "Web Push" (only 404 and 410 drop a subscription).
public final class WebPushSender: Sendable {
    /// A browser's subscription, as `PushSubscription.toJSON()` gave it.
    public struct Subscription: Sendable, Equatable {
        /// The push service URL (https).
        public var endpoint: String
        /// The browser's P-256 public key, base64url.
        public var p256dh: String
        /// The browser's 16-byte auth secret, base64url.
        public var auth: String

        /// Creates a subscription.
        public init(endpoint: String, p256dh: String, auth: String) {
            self.endpoint = endpoint
            self.p256dh = p256dh
            self.auth = auth
        }
    }

    /// One message to one subscription.
    public struct Message: Sendable {
        /// Where it goes.
        public var subscription: Subscription
        /// The JSON payload (≤ 3993 bytes).
        public var payload: [UInt8]
        /// `Topic`: a retry or duplicate replaces rather than adds (≤ 32 base64url characters).
        public var topic: String
        /// The request's deadline: `TTL`, and no retry with less than `minimumLeft` left.
        public var deadline: Date

        /// Creates a message.
        public init(subscription: Subscription, payload: [UInt8], topic: String, deadline: Date) {
            self.subscription = subscription
            self.payload = payload
            self.topic = topic
            self.deadline = deadline
        }
    }

    /// Push services whose endpoints browsers hand out (ntfy's list): the relay POSTs
    /// only to these, or to an origin in `extraOrigins` (tests).
    public static let allowedHostSuffixes = [".google.com", ".googleapis.com", ".mozilla.com", ".mozaws.net",
                                            ".windows.com", ".microsoft.com", ".apple.com"]

    private let vapid: VAPIDToken
    private let transport: CurlTransport
    private let extraOrigins: Set<String>
    private let clock: @Sendable () -> Date
    private let minimumLeft: TimeInterval
    private let retryDelay: TimeInterval

    /// The VAPID public key browsers subscribe with (base64url of the 65-byte point).
    public var publicKey: String { vapid.publicKey }

    /// A sender through `transport`.
    public init(vapid: VAPIDToken, transport: CurlTransport, extraOrigins: [String] = [], minimumLeft: TimeInterval = 3,
                retryDelay: TimeInterval = 1, clock: @escaping @Sendable () -> Date = Date.init) {
        self.vapid = vapid
        self.transport = transport
        self.extraOrigins = Set(extraOrigins.compactMap { VAPIDToken.origin(of: $0) })
        self.clock = clock
        self.minimumLeft = minimumLeft
        self.retryDelay = retryDelay
    }

    /// Whether the relay may POST to `endpoint` (https, a known push service or an extra origin).
    public static func isAllowed(endpoint: String, extraOrigins: Set<String> = []) -> Bool {
        guard let parsed = PushEndpoint(endpoint) else { return false }
        if extraOrigins.contains(parsed.origin) { return true }
        guard parsed.port == nil else { return false }
        return allowedHostSuffixes.contains { parsed.host.hasSuffix($0) }
    }

    /// Sends one message, retrying once where docs/protocol.md, "Web Push" says so.
    public func send(_ message: Message) async -> PushDelivery {
        guard Self.isAllowed(endpoint: message.subscription.endpoint, extraOrigins: extraOrigins) else {
            return PushDelivery(result: .skipped, reason: "endpoint not allowed")
        }
        let body: [UInt8]
        let authorization: String
        do {
            guard let p256dh = Base64URL.decode(message.subscription.p256dh),
                  let auth = Base64URL.decode(message.subscription.auth) else { throw CryptoError.badKey }
            body = try WebPushEncryption.encrypt(message.payload, p256dh: p256dh, auth: auth)
            authorization = try vapid.authorization(for: message.subscription.endpoint)
        } catch WebPushEncryptionError.payloadTooLarge {
            return PushDelivery(result: .rejected, reason: "payload too large")
        } catch {
            return PushDelivery(result: .rejected, reason: "bad subscription keys")
        }
        let first = await attempt(message, body: body, authorization: authorization)
        let left = message.deadline.timeIntervalSince(clock())
        switch WebPushResponse.result(first.status) {
        case .throttled:
            let wait = WebPushResponse.retryAfter(first.headers["retry-after"])
            guard let wait, left - wait >= minimumLeft else { return WebPushResponse.delivery(first, .throttled) }
            try? await Task.sleep(for: .seconds(wait))
            return await final(message, body: body, authorization: authorization)
        case .error where left - retryDelay >= minimumLeft:
            try? await Task.sleep(for: .seconds(retryDelay))
            return await final(message, body: body, authorization: authorization)
        case let result:
            return WebPushResponse.delivery(first, result)
        }
    }

    private func final(_ message: Message, body: [UInt8], authorization: String) async -> PushDelivery {
        let response = await attempt(message, body: body, authorization: authorization)
        return WebPushResponse.delivery(response, WebPushResponse.result(response.status)).afterRetry()
    }

    private func attempt(_ message: Message, body: [UInt8], authorization: String) async -> PushHTTPResponse {
        let left = message.deadline.timeIntervalSince(clock())
        return await transport.send(PushHTTPRequest(
            url: message.subscription.endpoint,
            headers: [("Content-Encoding", "aes128gcm"), ("Content-Type", "application/octet-stream"),
                      ("TTL", String(max(1, Int(left)))), ("Urgency", "high"), ("Topic", message.topic),
                      ("Authorization", authorization)],
            body: body, timeoutMilliseconds: max(1, min(10_000, Int(left * 1000))), requireHTTP2: false))
    }
}
