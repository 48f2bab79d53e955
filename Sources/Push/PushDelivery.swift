import Crypto
import Foundation

/// How one push to one target ended, in the words of the metric
/// `whereabot_pushes_total{result}` (docs/operations.md, "Metrics").
public enum PushResult: String, Sendable, CaseIterable {
    /// Accepted by the service.
    case sent
    /// The target is dead (APNs 400 BadDeviceToken/DeviceTokenNotForTopic or 410; Web
    /// Push 404/410): the caller deletes it.
    case dropped
    /// The service refused this push (a bug of ours: payload, header); the target is kept.
    case rejected
    /// Too many pushes for this target (429); kept.
    case throttled
    /// Our credentials were refused (provider token, topic, VAPID); kept.
    case authError = "auth_error"
    /// A first attempt that failed and was tried again (counted besides the final result).
    case retried
    /// No answer, or a 5xx, after the retry.
    case error
    /// Not sent: the target belongs to the other APNs environment, or its endpoint is not
    /// on the allow-list.
    case skipped
    /// Not sent: the service is not configured.
    case disabled
    /// Not sent: the account's or the target's push budget for the hour is spent, or the
    /// account's share of the push queue is full.
    case limited
}

/// The outcome of one push to one target.
public struct PushDelivery: Sendable, Equatable {
    /// The final result.
    public let result: PushResult
    /// The last HTTP status (nil: none arrived).
    public let status: Int?
    /// The service's reason word (APNs `reason`, or a short text), never a token.
    public let reason: String?
    /// Whether a second attempt was made.
    public let retried: Bool
    /// For APNs 410: when APNs learnt the token was dead (the body's `timestamp`).
    public let unregisteredAt: Date?

    /// Creates a delivery report.
    public init(result: PushResult, status: Int? = nil, reason: String? = nil, retried: Bool = false, unregisteredAt: Date? = nil) {
        self.result = result
        self.status = status
        self.reason = reason
        self.retried = retried
        self.unregisteredAt = unregisteredAt
    }

    /// The same report marked as a second attempt.
    func afterRetry() -> PushDelivery {
        PushDelivery(result: result, status: status, reason: reason, retried: true, unregisteredAt: unregisteredAt)
    }
}

/// The first 8 hex digits of SHA-256 of a device token or endpoint: what logs may show.
public func pushTargetFingerprint(_ target: String) -> String {
    Digest.sha256(Array(target.utf8)).prefix(4).map { String(format: "%02x", $0) }.joined()
}
