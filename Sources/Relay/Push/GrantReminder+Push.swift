import Foundation
import JSON
import RelayCore

/// A reminder as a push (docs/protocol.md, "Reminders"): an alert with Keep and Remove, for phones that hold no
/// socket. It carries the agent and the sentence, never a location.
extension GrantReminder {
    /// The APNs category whose actions are Keep and Remove.
    static let apnsCategory = "GRANT_REMINDER"

    /// How long a reminder stays worth delivering to a phone that is off.
    static let pushLifetime: TimeInterval = 24 * 3600

    /// 32 hex digits naming this grant's reminder on a device: the APNs collapse id is
    /// `reminder-KEY` and the Web Push topic KEY, so a newer reminder of the same grant
    /// replaces an older one.
    var pushKey: String {
        String(AgentKey.hash("reminder\u{0}\(clientID)\u{0}\(requesterID.map(UUIDText.lowercase) ?? "")").prefix(32))
    }

    /// The APNs JSON in `language`: the alert in category `GRANT_REMINDER` and what Keep and
    /// Remove answer with (at most 4,096 bytes: the agent's name is at most 200 characters,
    /// its id 255).
    func apns(_ language: String = "en") -> [UInt8] {
        let alert: JSONValue = ["title": .string(PushPayload.title(language)), "body": .string(text(language))]
        return JSONValue.object([
            "aps": ["alert": alert, "sound": "default", "category": .string(Self.apnsCategory), "thread-id": .string(clientID)],
            "kind": "reminder", "client_id": .string(clientID), "agent_name": JSONValue(agentName),
            "requester_id": JSONValue(requesterID.map(UUIDText.lowercase)),
        ]).bytes
    }

    /// The Web Push JSON in `language` (`kind` reminder), which the service worker shows with
    /// Keep and Remove.
    func webPush(_ language: String = "en") -> [UInt8] {
        JSONValue.object([
            "v": 1, "kind": "reminder", "title": .string(PushPayload.title(language)), "body": .string(text(language)),
            "client_id": .string(clientID), "agent_name": JSONValue(agentName),
            "requester_id": JSONValue(requesterID.map(UUIDText.lowercase)), "url": "/app/",
        ]).bytes
    }
}
