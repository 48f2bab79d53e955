import Foundation
import JSON
import PGBus
import RelayCore

/// Answers a phone's requests about its own account over its socket (docs/protocol.md,
/// "Account messages"): Web Push subscriptions (the endpoint allow-list is checked in Postgres),
/// always-allowed agents, the device list, agent keys, quiet hours, "may wake me" and
/// Stop all sharing. The user and device are the socket's, never the message's.
struct PhoneAccount: Sendable {
    let database: RelayDatabase
    /// WEB_PUSH_ALLOWED_ORIGINS (tests): origins allowed besides the known push services.
    let extraOrigins: [String]
    let logger: Logger

    /// The reply to send back (a JSON text message).
    func handle(_ request: PhoneAccountRequest, user: UUID, device: UUID) async -> String {
        do {
            switch request {
            case .pushSubscription(nil, _, _, _):
                _ = try await database.deleteWebPushSubscriptions(user: user, device: device)
                return #"{"type":"push_subscription","status":"deleted"}"#
            case .pushSubscription(let endpoint?, let p256dh, let auth, let language):
                let status = try await database.saveWebPushSubscription(user: user, device: device, endpoint: endpoint,
                                                                       p256dh: p256dh, auth: auth, extraOrigins: extraOrigins,
                                                                       language: language)
                if status == "saved" { return #"{"type":"push_subscription","status":"saved"}"# }
                let reason = status.hasPrefix("refused:") ? String(status.dropFirst(8)) : "invalid"
                return #"{"type":"push_subscription","status":"refused","reason":"\#(reason)"}"#
            case .alwaysAllow(let clientID, let name, let requester, let precision, let expiresInS):
                return try await agents(database.setAlwaysAllowed(user: user, clientID: clientID, clientName: name,
                                                                  requester: requester, allowed: true, precision: precision,
                                                                  expiresInS: expiresInS))
            case .alwaysAllowRemove(let clientID, let requester):
                return try await agents(database.setAlwaysAllowed(user: user, clientID: clientID, clientName: nil,
                                                                  requester: requester, allowed: false))
            case .alwaysAllowKeep(let clientID, let requester):
                return try await agents(database.keepAlwaysAllowed(user: user, clientID: clientID, requester: requester))
            case .listDevices:
                return devices(try await database.userDevices(user: user))
            case .renameDevice(let id, let name):
                return devices(try await database.renameDevice(user: user, device: id, name: name))
            case .removeDevice(let id):
                return devices(try await database.removeDevice(user: user, device: id))
            case .listAgentKeys:
                return keys(try await database.agentKeys(user: user))
            case .createAgentKey(let name):
                let (key, list) = try await database.createAgentKey(user: user, name: name)
                return String(keys(list).dropLast()) + #","created":\#(JSONText.quoted(key))}"#
            case .revokeAgentKey(let id):
                return keys(try await database.revokeAgentKey(user: user, id: id))
            case .setQuietHours(let windows):
                return quiet(try await database.setQuietHours(user: user, windows: windows))
            case .mayWake(let clientID, let requester, let value):
                return wakers(try await database.setMayWake(user: user, clientID: clientID, requester: requester, value: value))
            case .stopAllSharing:
                let ended = try await database.stopAllSharing(user: user)
                var reply = JSONText()
                reply.string("type", "stopped_all_sharing")
                for key in ["always_allowed", "shares", "agent_keys", "agents", "requests"] { reply.integer(key, ended[key]?.integer ?? 0) }
                logger.info("stopped_all_sharing", ["device": device.uuidString.lowercased()])
                return reply.object
            }
        } catch let refusal as RelayDatabase.Refusal where request.isAboutQuietHours {
            // Nothing stored: the database's sentence names the bad window (the phone's own input).
            return #"{"type":"error","message":\#(JSONText.quoted(refusal.sentence ?? Self.quietRefused))}"#
        } catch is RelayDatabase.Refusal {
            // Refused, list unchanged: the list as it is now, marked refused (no name, the
            // 25-key limit, a key of someone else; a generic agent id, a requester without a
            // share). A list that cannot be read now is "try again", never an empty list.
            do {
                let current = if request.isAboutAgentKeys {
                    keys(try await database.agentKeys(user: user))
                } else if case .mayWake = request {
                    wakers(try await database.mayWakeAgents(user: user))
                } else {
                    agents(try await database.alwaysAllowedAgents(user: user))
                }
                return String(current.dropLast()) + #","error":"refused"}"#
            } catch {
                logger.failure("phone_account_failed", error, ["device": device.uuidString.lowercased()])
                return #"{"type":"error","reason":"try_again"}"#
            }
        } catch {
            logger.failure("phone_account_failed", error, ["device": device.uuidString.lowercased()])
            return #"{"type":"error","reason":"try_again"}"#
        }
    }

    /// A reminder's Keep or Remove posted from a notification (`POST /v1/device/answer`,
    /// docs/protocol.md, "Reminders"): true when taken — Remove of a grant already gone
    /// included — and false when the database refuses it (Keep of a grant that is not for good, a generic agent id);
    /// throws when the database cannot answer.
    func answerReminder(keep: Bool, clientID: String, requester: UUID?, user: UUID) async throws -> Bool {
        do {
            if keep {
                _ = try await database.keepAlwaysAllowed(user: user, clientID: clientID, requester: requester)
            } else {
                _ = try await database.setAlwaysAllowed(user: user, clientID: clientID, clientName: nil, requester: requester,
                                                        allowed: false)
            }
            return true
        } catch is RelayDatabase.Refusal {
            return false
        }
    }

    /// What a browser phone is sent after its hello: the always-allowed list, the quiet
    /// hours and the agents that may wake the person (nil when the database cannot say now).
    func lists(user: UUID) async -> [String]? {
        do {
            async let allowed = database.alwaysAllowedAgents(user: user)
            async let windows = database.quietHours(user: user)
            async let wakers = database.mayWakeAgents(user: user)
            return [agents(try await allowed), quiet(try await windows), self.wakers(try await wakers)]
        } catch {
            logger.failure("phone_account_failed", error, ["user": user.uuidString.lowercased()])
            return nil
        }
    }

    /// What a refused quiet-hours change is answered with when the database gave no sentence.
    static let quietRefused = "These quiet hours cannot be saved."

    private func agents(_ list: PGJSON) -> String { #"{"type":"always_allowed","agents":\#(list.text)}"# }
    private func quiet(_ list: PGJSON) -> String { #"{"type":"quiet_hours","windows":\#(list.text)}"# }
    private func wakers(_ list: PGJSON) -> String { #"{"type":"may_wake","agents":\#(list.text)}"# }
    private func devices(_ list: PGJSON) -> String { #"{"type":"devices","devices":\#(list.text)}"# }
    private func keys(_ list: PGJSON) -> String { #"{"type":"agent_keys","keys":\#(list.text)}"# }
}

private extension PhoneAccountRequest {
    var isAboutAgentKeys: Bool {
        switch self {
        case .listAgentKeys, .createAgentKey, .revokeAgentKey: true
        default: false
        }
    }

    var isAboutQuietHours: Bool {
        if case .setQuietHours = self { return true }
        return false
    }
}
