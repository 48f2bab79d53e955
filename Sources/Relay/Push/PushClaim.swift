import Foundation
import Push

/// A claimed push stage as `relay.claim_push` returns it: what kind to send, to whom, and
/// what the payloads need (PUSH.md §2).
struct PushClaim: Decodable, Sendable, Equatable {
    /// An APNs device token and its environment.
    struct APNsTarget: Decodable, Sendable, Equatable {
        let token: String
        let environment: String
    }

    /// claimed, already, settled, expired, gone or not_applicable.
    let status: String
    /// alert, silent or checking (claimed only).
    let kind: String?
    let apns: [APNsTarget]?
    let web: [WebTarget]?
    let clientID: String?
    let clientName: String?
    let requester: Person?
    let expiresMs: Int64?
    /// The account whose phones are pushed (the fair queue's key).
    let owner: UUID?
    /// Targets the hourly budgets held back (claimed only).
    let limited: Limited?

    /// How many targets of each service a claim left out.
    struct Limited: Decodable, Sendable, Equatable {
        let apns: Int
        let web: Int
    }

    /// A Web Push subscription as stored.
    struct WebTarget: Decodable, Sendable, Equatable {
        let endpoint: String
        let p256dh: String
        let auth: String

        var subscription: WebPushSender.Subscription { .init(endpoint: endpoint, p256dh: p256dh, auth: auth) }
    }

    enum CodingKeys: String, CodingKey {
        case status, kind, apns, web, requester, owner, limited
        case clientID = "client_id"
        case clientName = "client_name"
        case expiresMs = "expires_ms"
    }

    /// The plan's view of this answer.
    var result: PushPlan.ClaimResult {
        guard status == "claimed", let kind = kind.flatMap(PushPlan.Kind.init(rawValue:)) else { return .refused(status) }
        return .claimed(kind)
    }
}
