import Foundation
import JSON
import PGBus
import RelayCore

extension RelayDatabase {
    /// Saves the Web Push subscription `device` of `user` sent over its socket:
    /// `saved`, or `refused:<reason>` (endpoint_not_allowed, invalid, limit, device, taken: another account saved it first).
    func saveWebPushSubscription(user: UUID, device: UUID, endpoint: String, p256dh: String, auth: String,
                                 extraOrigins: [String], language: String = "en") async throws -> String {
        try await account("select relay.save_web_push_subscription($1, $2, $3, $4, $5, $6, $7)",
                             [user, device, endpoint, p256dh, auth, extraOrigins, language]).scalar(String.self)
    }

    /// Deletes the Web Push subscriptions of `user`'s `device`.
    func deleteWebPushSubscriptions(user: UUID, device: UUID) async throws -> Int {
        try await account("select relay.delete_web_push_subscriptions($1, $2)", [user, device]).scalar(Int.self)
    }

    /// `user`'s always-allowed agents as JSON (`[{client_id, client_name, requester_id,
    /// precision, expires_ms, last_used_ms}]`).
    func alwaysAllowedAgents(user: UUID) async throws -> PGJSON {
        try await account("select relay.always_allowed_agents($1)", [user]).scalar(PGJSON.self)
    }

    /// Adds (`allowed`, answered with `precision`, for `expiresInS` seconds or for good) or
    /// removes an always-allowed agent; returns the new list.
    func setAlwaysAllowed(user: UUID, clientID: String, clientName: String?, requester: UUID?, allowed: Bool,
                          precision: LocationFix.Precision = .precise, expiresInS: Int? = nil) async throws -> PGJSON {
        try await account("select relay.set_always_allowed($1, $2, $3, $4, $5, $6, $7)",
                             [user, clientID, clientName, requester, allowed, precision.rawValue, expiresInS]).scalar(PGJSON.self)
    }

    /// Keeps a for-good always-allow (a reminder's Keep): its next reminder comes a whole
    /// interval from now; returns the list. An agent not always allowed for good: P0002.
    func keepAlwaysAllowed(user: UUID, clientID: String, requester: UUID?) async throws -> PGJSON {
        try await account("select relay.keep_always_allowed($1, $2, $3)", [user, clientID, requester]).scalar(PGJSON.self)
    }

    /// `user`'s quiet-hours windows as JSON (`[{days, start, end, time_zone}]`).
    func quietHours(user: UUID) async throws -> PGJSON {
        try await account("select relay.quiet_hours($1)", [user]).scalar(PGJSON.self)
    }

    /// Copies the time-zone names quiet hours may use from Postgres again, unless that was
    /// done within a day (the reap asks); how many were copied (0: fresh already).
    func refreshTimeZoneNames() async throws -> Int {
        try await pool.send("select relay.refresh_time_zone_names()").scalar(Int.self)
    }

    /// Replaces `user`'s quiet-hours windows; returns them. A bad window is refused (22023)
    /// with a sentence naming it (`PGError.primaryMessage`), and nothing is stored.
    func setQuietHours(user: UUID, windows: JSONValue) async throws -> PGJSON {
        try await account("select relay.set_quiet_hours($1, $2::jsonb)", [user, windows.text]).scalar(PGJSON.self)
    }

    /// The agents that may wake `user` in quiet hours (`[{client_id, client_name, requester_id}]`).
    func mayWakeAgents(user: UUID) async throws -> PGJSON {
        try await account("select relay.may_wake_agents($1)", [user]).scalar(PGJSON.self)
    }

    /// Marks or unmarks an agent that may wake `user`; returns the list.
    func setMayWake(user: UUID, clientID: String, requester: UUID?, value: Bool) async throws -> PGJSON {
        try await account("select relay.set_may_wake($1, $2, $3, $4)", [user, clientID, requester, value]).scalar(PGJSON.self)
    }

    /// Ends every standing permission of `user` (docs/protocol.md, "Stop all sharing"): the counts of what ended
    /// (`always_allowed`, `shares`, `agent_keys`, `requests`).
    func stopAllSharing(user: UUID) async throws -> JSONValue {
        try await account("select relay.stop_all_sharing($1)", [user]).scalar(PGJSON.self).parsed()
    }

    /// `user`'s devices as JSON (`[{id, name, platform, app_version, created_at}]`).
    func userDevices(user: UUID) async throws -> PGJSON {
        try await account("select relay.user_devices($1)", [user]).scalar(PGJSON.self)
    }

    /// Renames one of `user`'s devices; returns the list.
    func renameDevice(user: UUID, device: UUID, name: String) async throws -> PGJSON {
        try await account("select relay.rename_device($1, $2, $3)", [user, device, name]).scalar(PGJSON.self)
    }

    /// Removes one of `user`'s devices (its session is revoked); returns the list.
    func removeDevice(user: UUID, device: UUID) async throws -> PGJSON {
        try await account("select relay.remove_device($1, $2)", [user, device]).scalar(PGJSON.self)
    }

    /// `user`'s live agent keys as JSON (`[{id, name, prefix, created_at, last_used_at}]`).
    func agentKeys(user: UUID) async throws -> PGJSON {
        try await account("select relay.agent_keys($1)", [user]).scalar(PGJSON.self)
    }

    /// Creates an agent key for `user`: its plaintext (once) and the new list.
    func createAgentKey(user: UUID, name: String) async throws -> (key: String, keys: PGJSON) {
        guard let row = try await account("select r->>'key', r->'keys' from relay.create_agent_key($1, $2) r", [user, name]).first,
              let key = try row.decode(0, as: String?.self) else { throw Self.malformed("create_agent_key") }
        return (key, try row.decode(1, as: PGJSON.self))
    }

    /// Revokes one of `user`'s agent keys; returns the list.
    func revokeAgentKey(user: UUID, id: UUID) async throws -> PGJSON {
        try await account("select relay.revoke_agent_key($1, $2)", [user, id]).scalar(PGJSON.self)
    }
}
