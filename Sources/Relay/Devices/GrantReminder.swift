import Foundation
import JSON
import RelayCore

/// A reminder of a standing grant (docs/protocol.md, "Reminders"): a for-good always-allow was just used again
/// after standing `GRANT_REMINDER_DAYS` since it was made or kept. The database claims it
/// once (`relay.settle`) and notifies the instances holding the owner's sockets; each sends
/// every phone of the owner `{"type":"reminder",...}`, which the phone shows with Keep
/// (`always_allow_keep`) and Remove (`always_allow_remove`).
struct GrantReminder: Sendable, Equatable {
    /// The agent's OAuth client id.
    let clientID: String
    /// The agent's cleaned name, nil when unknown.
    let agentName: String?
    /// The person whose agent it is, for shared locations; nil for the owner's own agents.
    let requesterID: UUID?

    /// Decodes the `reminder` notification's fields; nil when any does not fit.
    init?(json: JSONValue) {
        guard let clientID = json["client_id"]?.string, (1...255).contains(clientID.count) else { return nil }
        var agentName: String?
        if let value = json["agent_name"], !value.isNull {
            guard let name = value.string, name.count <= 200 else { return nil }
            agentName = name
        }
        var requesterID: UUID?
        if let value = json["requester_id"], !value.isNull {
            guard let id = value.uuid else { return nil }
            requesterID = id
        }
        self.init(clientID: clientID, agentName: agentName, requesterID: requesterID)
    }

    /// A reminder of `clientID`'s grant.
    init(clientID: String, agentName: String?, requesterID: UUID?) {
        self.clientID = clientID
        self.agentName = agentName
        self.requesterID = requesterID
    }

    /// What the phone shows: "NAME can still check your location without asking." (in
    /// `language`, from the catalog's `push.reminder` texts).
    func text(_ language: String = "en", catalog: TextCatalog = .bundled) -> String {
        catalog.text(agentName == nil ? "push.reminder.unnamed" : "push.reminder", language: language, ["agent": agentName ?? ""])
    }

    /// The phone's message: `{"type":"reminder","client_id","agent_name","requester_id","text"}`.
    var phoneJSON: String {
        var json = JSONText()
        json.string("type", "reminder")
        json.string("client_id", clientID)
        json.string("agent_name", agentName)
        json.string("requester_id", requesterID.map(UUIDText.lowercase))
        json.string("text", text())
        return json.object
    }
}
