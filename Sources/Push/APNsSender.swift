import Crypto
import Foundation

/// Sends notifications to APNs over HTTP/2 with token authentication (docs/protocol.md, "APNs"), and
/// turns every answer of Apple's response table into a `PushDelivery`.
public final class APNsSender: Sendable {
    /// The APNs account settings.
    public struct Configuration: Sendable {
        /// APNS_KEY_ID: the `kid` of the provider token.
        public var keyID: String
        /// APNS_TEAM_ID: the `iss`.
        public var teamID: String
        /// APNS_TOPIC: the app's bundle id.
        public var topic: String
        /// The `.p8` signing key.
        public var key: P256Key
        /// APNS_ENVIRONMENT: `production` or `sandbox`; tokens of the other are skipped.
        public var environment: String
        /// APNS_URL: a base URL replacing Apple's host (test fakes only).
        public var baseURL: String?

        /// Creates the settings.
        public init(keyID: String, teamID: String, topic: String, key: P256Key, environment: String = "production",
                    baseURL: String? = nil) {
            self.keyID = keyID
            self.teamID = teamID
            self.topic = topic
            self.key = key
            self.environment = environment
            self.baseURL = baseURL
        }

        /// Where pushes go.
        var host: String {
            baseURL ?? (environment == "sandbox" ? "https://api.sandbox.push.apple.com" : "https://api.push.apple.com")
        }
    }

    /// One notification to one device token.
    public struct Notification: Sendable {
        /// The device token (hex).
        public var token: String
        /// The token's environment (`push_tokens.environment`).
        public var environment: String
        /// `alert` or `background`.
        public var pushType: String
        /// 10 (alert) or 5 (background).
        public var priority: Int
        /// `apns-collapse-id`, or nil.
        public var collapseID: String?
        /// `apns-id`: the same on a retry, so a duplicate replaces rather than adds.
        public var id: String
        /// The JSON payload (≤ 4096 bytes).
        public var payload: [UInt8]
        /// The request's deadline: `apns-expiration`, and no retry with less than `minimumLeft` left.
        public var deadline: Date

        /// Creates a notification.
        public init(token: String, environment: String, pushType: String, priority: Int, collapseID: String?, id: String,
                    payload: [UInt8], deadline: Date) {
            self.token = token
            self.environment = environment
            self.pushType = pushType
            self.priority = priority
            self.collapseID = collapseID
            self.id = id
            self.payload = payload
            self.deadline = deadline
        }
    }

    /// APNs' payload limit.
    public static let maximumPayload = 4096

    /// The provider token (public so that tests and logs can see its generation).
    public let providerToken: APNsProviderToken
    private let configuration: Configuration
    private let transport: CurlTransport
    private let clock: @Sendable () -> Date
    private let minimumLeft: TimeInterval

    /// A sender through `transport`.
    public init(configuration: Configuration, transport: CurlTransport, minimumLeft: TimeInterval = 3,
                clock: @escaping @Sendable () -> Date = Date.init) {
        self.configuration = configuration
        self.transport = transport
        self.clock = clock
        self.minimumLeft = minimumLeft
        self.providerToken = APNsProviderToken(keyID: configuration.keyID, teamID: configuration.teamID,
                                               key: configuration.key, clock: clock)
    }

    /// Sends one notification, retrying once where docs/protocol.md, "APNs" says so.
    public func send(_ notification: Notification) async -> PushDelivery {
        guard notification.environment == configuration.environment else {
            return PushDelivery(result: .skipped, reason: "environment")
        }
        guard notification.payload.count <= Self.maximumPayload,
              notification.token.count <= 200, notification.token.allSatisfy(\.isHexDigit) else {
            return PushDelivery(result: .rejected, reason: "PayloadTooLarge")
        }
        let minted: APNsProviderToken.Minted
        do { minted = try providerToken.current() } catch { return PushDelivery(result: .authError, reason: "signing") }
        let first = await attempt(notification, token: minted)
        switch APNsResponse.action(first) {
        case .expiredProviderToken:
            let renewal: APNsProviderToken.Renewal
            do { renewal = try providerToken.expired(generation: minted.generation) } catch {
                return PushDelivery(result: .authError, status: 403, reason: "signing")
            }
            switch renewal {
            case .renewed(let token), .alreadyRenewed(let token):
                return await final(notification, token: token)
            case .tooSoon:
                return PushDelivery(result: .authError, status: 403, reason: "ExpiredProviderToken (clock skew?)")
            }
        case .retry where notification.deadline.timeIntervalSince(clock()) >= minimumLeft:
            return await final(notification, token: (try? providerToken.current()) ?? minted, ownConnection: true)
        case .retry:
            return APNsResponse.delivery(first, result: .error)
        case .result(let result):
            return APNsResponse.delivery(first, result: result)
        }
    }

    private func final(_ notification: Notification, token: APNsProviderToken.Minted, ownConnection: Bool = false) async -> PushDelivery {
        let response = await attempt(notification, token: token, ownConnection: ownConnection)
        let result: PushResult = switch APNsResponse.action(response) {
        case .result(let result): result
        case .expiredProviderToken: .authError
        case .retry: .error
        }
        return APNsResponse.delivery(response, result: result).afterRetry()
    }

    private func attempt(_ notification: Notification, token: APNsProviderToken.Minted, ownConnection: Bool = false) async -> PushHTTPResponse {
        var headers: [(String, String)] = [
            ("authorization", "bearer \(token.token)"),
            ("apns-push-type", notification.pushType),
            ("apns-priority", String(notification.priority)),
            ("apns-topic", configuration.topic),
            ("apns-expiration", String(Int((notification.deadline.timeIntervalSince1970).rounded(.up)))),
            ("apns-id", notification.id),
            ("content-type", "application/json"),
        ]
        if let collapseID = notification.collapseID { headers.append(("apns-collapse-id", collapseID)) }
        let left = notification.deadline.timeIntervalSince(clock())
        return await transport.send(PushHTTPRequest(
            url: "\(configuration.host)/3/device/\(notification.token)", headers: headers, body: notification.payload,
            timeoutMilliseconds: max(1, min(10_000, Int(left * 1000))), requireHTTP2: true, ownConnection: ownConnection))
    }

    /// `apns-id` for one (request, stage, target): a version-4-shaped UUID from SHA-256 of
    /// the parts, the same on every retry.
    public static func notificationID(_ parts: String...) -> String {
        var bytes = Array(Digest.sha256(Array(parts.joined(separator: "\u{0}").utf8)).prefix(16))
        bytes[6] = (bytes[6] & 0x0F) | 0x40
        bytes[8] = (bytes[8] & 0x3F) | 0x80
        let hex = bytes.map { String(format: "%02X", $0) }.joined()
        let characters = Array(hex)
        return [0..<8, 8..<12, 12..<16, 16..<20, 20..<32].map { String(characters[$0]) }.joined(separator: "-")
    }
}
