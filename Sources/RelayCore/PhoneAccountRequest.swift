import Foundation
import JSON

/// What a phone asks of its own account over its socket (docs/protocol.md, "Account messages"): its Web
/// Push subscription, its always-allowed agents (and a reminder's Keep), its device list, its agent keys, its
/// quiet hours and the agents that may wake it. Only a
/// phone socket carries these, so an agent's token can never add itself to the
/// always-allowed list or mint itself a key.
/// Every field is checked here; the database checks again.
public enum PhoneAccountRequest: Sendable, Equatable {
    /// Save this subscription (`PushSubscription.toJSON()`) with the language its
    /// notifications are written in (ISO 639-1, `en` unless the page says), or with a nil
    /// endpoint delete this device's subscriptions.
    case pushSubscription(endpoint: String?, p256dh: String, auth: String, language: String = "en")
    /// Always allow `clientID` (for `requesterID`'s requests when set), answered with
    /// `precision`, for `expiresInS` seconds ("Allow for 1 hour") or for good (nil).
    case alwaysAllow(clientID: String, clientName: String, requesterID: UUID?,
                     precision: LocationFix.Precision = .precise, expiresInS: Int? = nil)
    /// Stop always allowing it.
    case alwaysAllowRemove(clientID: String, requesterID: UUID?)
    /// Keep always allowing it (a reminder's Keep, docs/protocol.md, "Reminders"): the next reminder comes
    /// GRANT_REMINDER_DAYS from now.
    case alwaysAllowKeep(clientID: String, requesterID: UUID?)
    /// Send the device list.
    case listDevices
    /// Rename one of the user's devices.
    case renameDevice(UUID, name: String)
    /// Remove one of the user's devices (its session is revoked).
    case removeDevice(UUID)
    /// Send the user's live agent keys (never a key itself).
    case listAgentKeys
    /// Create an agent key with this name (its plaintext comes back once).
    case createAgentKey(name: String)
    /// Revoke one of the user's agent keys.
    case revokeAgentKey(UUID)
    /// Replace the account's quiet-hours windows (docs/protocol.md, "Quiet hours"; the database checks each).
    case setQuietHours(windows: JSONValue)
    /// Mark (`value`) or unmark `clientID` (for `requesterID`'s requests when set) as an
    /// agent that may wake the person in quiet hours.
    case mayWake(clientID: String, requesterID: UUID?, value: Bool)
    /// End every always-allow, share, invitation and agent key and answer every waiting
    /// request as declined (docs/protocol.md, "Stop all sharing"; the page revokes OAuth grants).
    case stopAllSharing

    /// Longest endpoint accepted (the table's limit).
    package static let maximumEndpointLength = 2048
    /// How long an always-allow "for a while" may last (relay.set_always_allowed's bounds).
    package static let alwaysAllowSeconds = 1...86_400
    /// Quiet-hours windows an account may have (relay.set_quiet_hours refuses more).
    package static let maximumQuietWindows = 8

    /// The primary language subtag of a BCP 47 tag (`de-DE` → `de`), lowercased; nil for
    /// anything that does not start with two or three ASCII letters.
    package static func language(_ tag: String) -> String? {
        guard tag.utf8.count <= 35 else { return nil }
        let primary = tag.split(separator: "-", maxSplits: 1, omittingEmptySubsequences: false).first.map(String.init) ?? ""
        guard (2...3).contains(primary.utf8.count), primary.utf8.allSatisfy({ ($0 | 0x20) >= 0x61 && ($0 | 0x20) <= 0x7A })
        else { return nil }
        let lowered = primary.lowercased()
        // Two letters are stored; a three-letter tag has no texts here and is written in English.
        return lowered.count == 2 ? lowered : "en"
    }

    /// Decodes the account messages; nil for other types, `.none` results are malformed.
    package static func parse(_ object: JSONValue) -> PhoneAccountRequest?? {
        func requester() -> UUID?? {
            guard let value = object["requester_id"], !value.isNull else { return .some(nil) }
            guard let id = value.uuid else { return nil }
            return .some(id)
        }
        func clientID() -> String? {
            guard let id = object["client_id"]?.string, (1...255).contains(id.count) else { return nil }
            return id
        }
        switch object["type"]?.string {
        case "push_subscription":
            if object["endpoint"]?.isNull == true { return .some(.pushSubscription(endpoint: nil, p256dh: "", auth: "")) }
            let keys = object["keys"].flatMap { if case .object = $0 { $0 } else { nil } } ?? object
            guard let endpoint = object["endpoint"]?.string, endpoint.utf8.count <= maximumEndpointLength,
                  let p256dh = keys["p256dh"]?.string, p256dh.utf8.count <= 100,
                  let auth = keys["auth"]?.string, auth.utf8.count <= 30 else { return .some(nil) }
            var language = "en"
            if let value = object["language"], !value.isNull {
                guard let tag = value.string, let primary = Self.language(tag) else { return .some(nil) }
                language = primary
            }
            return .some(.pushSubscription(endpoint: endpoint, p256dh: p256dh, auth: auth, language: language))
        case "always_allow":
            guard let id = clientID(), let requester = requester() else { return .some(nil) }
            let name = DisplayText.clean(object["client_name"]?.string ?? "", maximumLength: 200)
            var precision = LocationFix.Precision.precise
            if let value = object["precision"], !value.isNull {
                guard let word = value.string.flatMap(LocationFix.Precision.init(rawValue:)) else { return .some(nil) }
                precision = word
            }
            var expiresInS: Int?
            if let value = object["expires_in_s"], !value.isNull {
                // Range-checked as a Double first: Int of 1e300 would not fit.
                guard let seconds = value.number, seconds == seconds.rounded(),
                      (Double(alwaysAllowSeconds.lowerBound)...Double(alwaysAllowSeconds.upperBound)).contains(seconds) else {
                    return .some(nil)
                }
                expiresInS = Int(seconds)
            }
            return .some(.alwaysAllow(clientID: id, clientName: name, requesterID: requester, precision: precision,
                                      expiresInS: expiresInS))
        case "always_allow_remove":
            guard let id = clientID(), let requester = requester() else { return .some(nil) }
            return .some(.alwaysAllowRemove(clientID: id, requesterID: requester))
        case "always_allow_keep":
            guard let id = clientID(), let requester = requester() else { return .some(nil) }
            return .some(.alwaysAllowKeep(clientID: id, requesterID: requester))
        case "devices":
            return .some(.listDevices)
        case "device_rename":
            guard let id = object["device_id"]?.uuid, let name = object["name"]?.string, name.count <= 1000 else {
                return .some(nil)
            }
            return .some(.renameDevice(id, name: DisplayText.clean(name, maximumLength: PhoneMessage.maximumDeviceNameLength)))
        case "device_remove":
            guard let id = object["device_id"]?.uuid else { return .some(nil) }
            return .some(.removeDevice(id))
        case "agent_keys":
            return .some(.listAgentKeys)
        case "agent_key_create":
            guard let name = object["name"]?.string, name.count <= 1000 else { return .some(nil) }
            let clean = DisplayText.clean(name, maximumLength: 100)
            return clean.isEmpty ? .some(nil) : .some(.createAgentKey(name: clean))
        case "agent_key_revoke":
            guard let id = object["id"]?.uuid else { return .some(nil) }
            return .some(.revokeAgentKey(id))
        case "quiet_hours":
            // The list goes to the database, which names any bad window; one far past the
            // limit is not even sent.
            guard case .array(let windows)? = object["windows"], windows.count <= 4 * maximumQuietWindows else {
                return .some(nil)
            }
            return .some(.setQuietHours(windows: .array(windows)))
        case "stop_all_sharing":
            return .some(.stopAllSharing)
        case "may_wake":
            guard let id = clientID(), let requester = requester(), case .bool(let value)? = object["value"] else {
                return .some(nil)
            }
            return .some(.mayWake(clientID: id, requesterID: requester, value: value))
        default:
            return nil
        }
    }
}
