import Foundation
import Push
import RelayCore

/// The push services one instance may use: APNs and Web Push, each on only when fully
/// configured (docs/operations.md, "Configuration"), sharing one libcurl transport.
public struct PushServices: Sendable {
    /// The APNs sender, or nil when APNS_* is not set.
    public let apns: APNsSender?
    /// The Web Push sender, or nil when VAPID_* is not set.
    public let webPush: WebPushSender?
    /// The transport both use (nil when neither is on).
    let transport: CurlTransport?
    /// When stages go out.
    public let timing: PushTiming
    /// How many pushes an hour each target and account may get.
    public let budgets: PushBudgets
    /// WEB_PUSH_ALLOWED_ORIGINS: origins a browser may subscribe with besides the known
    /// push services (tests).
    public let webPushOrigins: [String]

    /// The VAPID public key browsers subscribe with (base64url), nil without Web Push.
    public var vapidPublicKey: String? { webPush?.publicKey }

    /// No push service: every push counts as `disabled`.
    public static let none = PushServices(apns: nil, webPush: nil, transport: nil)

    /// The services built from settings (see `PushSettings`).
    public init(apns: APNsSender?, webPush: WebPushSender?, transport: CurlTransport?, timing: PushTiming = PushTiming(),
                budgets: PushBudgets = PushBudgets(), webPushOrigins: [String] = []) {
        self.webPushOrigins = webPushOrigins
        self.budgets = budgets
        self.apns = apns
        self.webPush = webPush
        self.transport = transport
        self.timing = timing
    }
}
