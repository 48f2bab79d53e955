import Foundation
import JSON
import Push

/// A claimed push stage as `relay.claim_push` returns it: what kind to send, to whom, and
/// what the payloads need (PUSH.md §2).
struct PushClaim: Sendable, Equatable {
    /// An APNs device token and its environment.
    struct APNsTarget: Sendable, Equatable {
        let token: String
        let environment: String
    }

    /// Whether this instance sends the stage.
    let status: RelayStatus.Claim
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
    struct Limited: Sendable, Equatable {
        let apns: Int
        let web: Int
    }

    /// A Web Push subscription as stored.
    struct WebTarget: Sendable, Equatable {
        let endpoint: String
        let p256dh: String
        let auth: String

        var subscription: WebPushSender.Subscription { .init(endpoint: endpoint, p256dh: p256dh, auth: auth) }
    }

    /// The plan's view of this answer.
    var result: PushPlan.ClaimResult {
        guard status == .claimed, let kind = kind.flatMap(PushPlan.Kind.init(rawValue:)) else { return .refused(status) }
        return .claimed(kind)
    }
}

extension PushClaim {
    /// Decodes `relay.claim_push`'s result; nil when it does not have that shape.
    init?(json: JSONValue) {
        guard let status = json["status"]?.string.flatMap(RelayStatus.Claim.init(rawValue:)) else { return nil }
        func strings(_ value: JSONValue, _ keys: String...) -> [String]? {
            let fields = keys.compactMap { value[$0]?.string }
            return fields.count == keys.count ? fields : nil
        }
        func optional<T>(_ key: String, _ decode: (JSONValue) -> T?) -> T?? {
            guard let value = json[key], !value.isNull else { return .some(nil) }
            return decode(value).map { .some($0) }
        }
        guard let apns = optional("apns", { $0.array?.compactMap { strings($0, "token", "environment") } }),
              let web = optional("web", { $0.array?.compactMap { strings($0, "endpoint", "p256dh", "auth") } }),
              let requester = optional("requester", Person.init(json:)),
              let limited = optional("limited", { value in value["apns"]?.integer.flatMap { apns in
                  value["web"]?.integer.map { Limited(apns: Int(apns), web: Int($0)) } } }),
              let owner = optional("owner", \.uuid), let expiresMs = optional("expires_ms", \.integer),
              let kind = optional("kind", \.string), let clientID = optional("client_id", \.string),
              let clientName = optional("client_name", \.string),
              apns.map({ $0.count }) == json["apns"]?.array?.count, web.map({ $0.count }) == json["web"]?.array?.count
        else { return nil }
        self.init(status: status, kind: kind, apns: apns?.map { APNsTarget(token: $0[0], environment: $0[1]) },
                  web: web?.map { WebTarget(endpoint: $0[0], p256dh: $0[1], auth: $0[2]) }, clientID: clientID,
                  clientName: clientName, requester: requester, expiresMs: expiresMs, owner: owner, limited: limited)
    }
}
