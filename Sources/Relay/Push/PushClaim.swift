import Foundation
import JSON
import Push
import RelayCore

/// A claimed push stage as `relay.claim_push` returns it: what kind to send, to whom, and
/// what the payloads need (docs/protocol.md, "Who sends: the claim").
struct PushClaim: Sendable, Equatable {
    /// An APNs device token, its environment, and the language its notifications are in.
    struct APNsTarget: Sendable, Equatable {
        let token: String
        let environment: String
        var language = "en"
    }

    /// Whether this instance sends the stage.
    let status: RelayStatus.Claim
    /// alert, silent or checking (claimed only).
    let kind: String?
    let apns: [APNsTarget]?
    let web: [WebTarget]?
    let clientID: String?
    let clientName: String?
    /// The agent's reason for asking, for the alert's text (nil: none).
    var reason: String? = nil
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

    /// A Web Push subscription as stored, with the language its notifications are in.
    struct WebTarget: Sendable, Equatable {
        let endpoint: String
        let p256dh: String
        let auth: String
        var language = "en"

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
        // An array whose every element decodes (one malformed target refuses the claim).
        func all<T>(_ decode: @escaping (JSONValue) -> T?) -> (JSONValue) -> [T]? {
            { value in
                guard let elements = value.array else { return nil }
                let decoded = elements.compactMap(decode)
                return decoded.count == elements.count ? decoded : nil
            }
        }
        let apnsTarget = { (value: JSONValue) -> APNsTarget? in
            guard let token = value["token"]?.string, let environment = value["environment"]?.string else { return nil }
            return APNsTarget(token: token, environment: environment, language: value["language"]?.string ?? "en")
        }
        let webTarget = { (value: JSONValue) -> WebTarget? in
            guard let endpoint = value["endpoint"]?.string, let p256dh = value["p256dh"]?.string,
                  let auth = value["auth"]?.string else { return nil }
            return WebTarget(endpoint: endpoint, p256dh: p256dh, auth: auth, language: value["language"]?.string ?? "en")
        }
        let limits = { (value: JSONValue) -> Limited? in
            guard let apns = value["apns"]?.integer, let web = value["web"]?.integer else { return nil }
            return Limited(apns: Int(apns), web: Int(web))
        }
        guard let apns = json.optionalMember("apns", all(apnsTarget)), let web = json.optionalMember("web", all(webTarget)),
              let requester = json.optionalMember("requester", Person.init(json:)),
              let limited = json.optionalMember("limited", limits),
              let owner = json.optionalMember("owner", \.uuid), let expiresMs = json.optionalMember("expires_ms", \.integer),
              let kind = json.optionalMember("kind", \.string), let clientID = json.optionalMember("client_id", \.string),
              let clientName = json.optionalMember("client_name", \.string) else { return nil }
        guard let reason = json.optionalMember("reason", \.string) else { return nil }
        self.init(status: status, kind: kind, apns: apns, web: web, clientID: clientID, clientName: clientName,
                  reason: reason, requester: requester, expiresMs: expiresMs, owner: owner, limited: limited)
    }
}
