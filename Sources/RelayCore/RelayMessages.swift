import Foundation
import JSON

/// A locate ping as the phone receives it (`{"type":"locate",...}`), and as the locate
/// notification and `relay.device_hellos` carry it (those add the waiter's reply key,
/// which the holder seals a fix to and never sends to the phone).
public struct LocateMessage: Sendable, Equatable {
    /// The request id; answers carry it.
    public let id: UUID
    /// The asking agent's OAuth client id (`agent-key` for agent keys).
    public let clientID: String
    /// The agent's name (cleaned), nil when unknown: the browser phone's prompt shows it.
    public let agentName: String?
    /// Epoch milliseconds when the relay stops waiting.
    public let expiresMs: Int64
    /// The person whose agent asks, for shared locations; nil for the owner's own agents.
    public let requester: Person?
    /// The waiter's X25519 public key for this request (32 bytes), when the database sent it.
    public let replyKey: [UInt8]?
    /// The agent's reason for asking (cleaned), nil when it gave none: the prompt quotes it.
    public let reason: String?
    /// The relay's decision when the ping was made: how precisely the owner always allows
    /// this agent (for this requester), nil when the person must be asked. A phone answers
    /// unprompted only when the ping says so, whatever list it holds.
    public let alwaysAllow: LocationFix.Precision?

    /// The phone's form, `{"type":"locate",...}`, with `requester` null for the owner's own
    /// agents, `reason` only when the agent gave one, and never the reply key.
    public var phoneJSON: String {
        var json = JSONText()
        json.string("type", "locate")
        json.string("id", UUIDText.lowercase(id))
        json.string("client_id", clientID)
        json.string("agent_name", agentName)
        json.integer("expires_ms", expiresMs)
        if let reason { json.string("reason", reason) }  // only when the agent gave one
        json.raw("requester", requester?.json)
        json.raw("always_allow", alwaysAllow.map { precision in
            var decision = JSONText()
            decision.string("precision", precision.rawValue)
            return decision.object
        })
        return json.object
    }

    /// Creates a locate message.
    public init(id: UUID, clientID: String, agentName: String? = nil, expiresMs: Int64, requester: Person?,
                replyKey: [UInt8]? = nil, reason: String? = nil, alwaysAllow: LocationFix.Precision? = nil) {
        self.replyKey = replyKey
        self.reason = reason
        self.alwaysAllow = alwaysAllow
        self.id = id
        self.clientID = clientID
        self.agentName = agentName
        self.expiresMs = expiresMs
        self.requester = requester
    }
}

/// A user as shown to others: in pings and in sharing lists (decoded from the user cards
/// `relay.claim_push` returns; written with `json`).
public struct Person: Decodable, Sendable, Equatable {
    /// The user's id.
    public let userID: UUID?
    /// Display name.
    public let name: String
    /// Email address.
    public let email: String

    package enum CodingKeys: String, CodingKey {
        case userID = "user_id"
        case name
        case email
    }

    /// The person as JSON text, with the user id in lowercase as Postgres writes UUIDs.
    package var json: String {
        var json = JSONText()
        if let userID { json.string("user_id", UUIDText.lowercase(userID)) }
        json.string("name", name)
        json.string("email", email)
        return json.object
    }

    /// Creates a person.
    public init(userID: UUID?, name: String, email: String) {
        self.userID = userID
        self.name = name
        self.email = email
    }
}

/// How a phone answered (what `relay.settle` records; the fix itself only travels sealed).
public enum PhoneAnswer: Sendable, Equatable {
    /// A location fix, sealed to the waiter's reply key (base64).
    case location(sealed: String)
    /// A location fix for a waiter on the answering instance: handed over in process, so
    /// nothing about it reaches Postgres but the outcome.
    case localLocation
    /// The user declined (`user`) or did not answer on the phone (`no_answer`).
    case denied(reason: DenialReason)
    /// No location: permission off, no fix, or another error.
    case unavailable(reason: UnavailableReason)

    /// Why a request was denied.
    public enum DenialReason: String, Sendable {
        /// The user tapped Reject.
        case user
        /// The phone's prompt expired.
        case noAnswer = "no_answer"
    }

    /// Why no location could be read.
    public enum UnavailableReason: String, Sendable {
        /// Location permission is off.
        case permission
        /// No fix in time.
        case noFix = "no_fix"
        /// Anything else.
        case error
    }

    package var outcome: RelayStatus.Outcome {
        switch self {
        case .location, .localLocation: .location
        case .denied: .denied
        case .unavailable: .unavailable
        }
    }

    package var reason: String? {
        switch self {
        case .location, .localLocation: nil
        case .denied(let reason): reason.rawValue
        case .unavailable(let reason): reason.rawValue
        }
    }

    package var sealed: String? {
        if case .location(let sealed) = self { sealed } else { nil }
    }
}

extension LocateMessage {
    /// Decodes the notification, table or phone form from parsed JSON (`type` and `owner`
    /// are ignored); nil when a field is missing or malformed.
    package init?(json: JSONValue) {
        guard let id = json["id"]?.uuid, let clientID = json["client_id"]?.string,
              let expiresMs = json["expires_ms"]?.integer else { return nil }
        var requester: Person?
        if let card = json["requester"], !card.isNull {
            guard let person = Person(json: card) else { return nil }
            requester = person
        }
        var replyKey: [UInt8]?
        if let text = json["reply_key"], !text.isNull {
            guard let key = text.string.flatMap({ Data(base64Encoded: $0) }), key.count == 32 else { return nil }
            replyKey = Array(key)
        }
        var agentName: String?
        if let name = json["agent_name"], !name.isNull {
            guard let text = name.string else { return nil }
            agentName = DisplayText.clean(text, maximumLength: 200)
        }
        var reason: String?
        if let value = json["reason"], !value.isNull {
            guard let text = value.string, case .reason(let cleaned) = LocateReason.check(text) else { return nil }
            reason = cleaned
        }
        var alwaysAllow: LocationFix.Precision?
        if let decision = json["always_allow"], !decision.isNull {
            guard let precision = decision["precision"]?.string.flatMap(LocationFix.Precision.init(rawValue:)) else { return nil }
            alwaysAllow = precision
        }
        self.init(id: id, clientID: clientID, agentName: agentName, expiresMs: expiresMs, requester: requester, replyKey: replyKey,
                  reason: reason, alwaysAllow: alwaysAllow)
    }
}

extension Person {
    /// Decodes a user card from parsed JSON; nil when name or email is missing.
    package init?(json: JSONValue) {
        guard let name = json["name"]?.string, let email = json["email"]?.string else { return nil }
        var userID: UUID?
        if let id = json["user_id"], !id.isNull {
            guard let uuid = id.uuid else { return nil }
            userID = uuid
        }
        self.init(userID: userID, name: name, email: email)
    }
}
