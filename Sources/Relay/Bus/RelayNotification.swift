import Foundation
import JSON
import RelayCore

/// One notification of the relay's channels, decoded from its JSON payload; nil for a
/// channel the relay does not know or a payload that does not fit its channel.
///
/// Locates, answers, cancels and reminders come on the instance's own channel (`channel(of:)`),
/// addressed by the database to the instances concerned; device, key and replay events are
/// broadcast on channels every instance hears.
enum RelayNotification: Sendable, Equatable {
    /// A settled request for its waiter here; `cancel` when the owner's phones here got the
    /// ping too (the cancel rides along with the answer).
    case answer(AnswerNotification, cancel: Bool)
    /// A new request for the owner's phones here.
    case locate(LocateMessage, owner: UUID)
    /// The request was settled or expired: cancel the pings sent from here.
    case cancel(UUID)
    /// A reminder of a standing grant for the owner's phones here (docs/protocol.md, "Reminders"); `push` when
    /// this instance settled the answer that claimed it, so it pushes it too.
    case reminder(GrantReminder, owner: UUID, push: Bool)
    /// `whereabot_replay`: send a sealed answer again.
    case replay(UUID)
    /// `whereabot_device`: a device said hello elsewhere or was revoked.
    case device(UUID, owner: UUID, event: DeviceEvent, connection: UUID?)
    /// `whereabot_key`: an agent key was revoked.
    case key(UUID)

    /// The channels every instance listens on besides its own.
    static let broadcastChannels = ["whereabot_device", "whereabot_key", "whereabot_replay"]
    /// What every instance channel's name starts with.
    static let instanceChannelPrefix = "whereabot_i_"

    /// The channel of instance `instance`, as `private.instance_channel` names it:
    /// `whereabot_i_` and the first 32 hex digits of the SHA-256 of the id.
    static func channel(of instance: String) -> String {
        instanceChannelPrefix + AgentKey.hash(instance).prefix(32)
    }

    /// The largest payload PostgreSQL sends (NOTIFY refuses 8000 bytes and more).
    static let maximumPayloadBytes = 8000

    /// Decodes `payload` of `channel`.
    static func decode(channel: String, payload: String) -> RelayNotification? {
        guard payload.utf8.count < maximumPayloadBytes, let json = JSONValue.parse(payload) else { return nil }
        if channel.hasPrefix(instanceChannelPrefix) {
            switch json["kind"]?.string {
            case "answer"?:
                guard let answer = AnswerNotification(json: json) else { return nil }
                return .answer(answer, cancel: json["cancel"]?.bool ?? false)
            case "locate"?:
                guard let ping = LocateMessage(json: json), let owner = json["owner"]?.uuid else { return nil }
                return .locate(ping, owner: owner)
            case "cancel"?:
                return json["id"]?.uuid.map { .cancel($0) }
            case "reminder"?:
                guard let reminder = GrantReminder(json: json), let owner = json["owner"]?.uuid,
                      let pusher = json.optionalMember("pusher", \.string) else { return nil }
                return .reminder(reminder, owner: owner, push: pusher.map { channel == Self.channel(of: $0) } ?? false)
            default:
                return nil
            }
        }
        switch channel {
        case "whereabot_replay":
            return json["id"]?.uuid.map { .replay($0) }
        case "whereabot_device":
            guard let device = json["device"]?.uuid, let owner = json["owner"]?.uuid,
                  let event = json["event"]?.string.flatMap(DeviceEvent.init(rawValue:)) else {
                return nil
            }
            var connection: UUID?
            if let value = json["connection"], !value.isNull {
                guard let id = value.uuid else { return nil }
                connection = id
            }
            return .device(device, owner: owner, event: event, connection: connection)
        case "whereabot_key":
            return json["key_id"]?.uuid.map { .key($0) }
        default:
            return nil
        }
    }
}

/// What a `whereabot_device` notification says happened to a device.
enum DeviceEvent: String, Sendable, Equatable {
    /// It said hello on a socket (of any instance): older sockets of it are replaced.
    case hello
    /// It was removed: its sockets close and its session is revoked.
    case revoked
}
