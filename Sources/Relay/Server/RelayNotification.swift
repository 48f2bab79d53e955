import Foundation

/// One notification of the relay's channels, decoded from its JSON payload; nil for a
/// channel the relay does not know or a payload that does not fit its channel.
///
/// Locates, answers and cancels come on the instance's own channel (`channel(of:)`),
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
    /// `whereabot_replay`: send a sealed answer again.
    case replay(UUID)
    /// `whereabot_device`: a device said hello elsewhere or was revoked.
    case device(UUID, event: String, connection: UUID?)
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

    private struct Kind: Decodable { let kind: String }
    private struct Owner: Decodable { let owner: UUID }
    private struct RequestID: Decodable { let id: UUID }
    private struct Cancel: Decodable { let cancel: Bool? }
    private struct DeviceEvent: Decodable {
        let device: UUID
        let event: String
        let connection: UUID?
    }
    private struct KeyEvent: Decodable {
        let keyID: UUID
        enum CodingKeys: String, CodingKey { case keyID = "key_id" }
    }

    /// The largest payload PostgreSQL sends (NOTIFY refuses 8000 bytes and more).
    static let maximumPayloadBytes = 8000

    /// Decodes `payload` of `channel`.
    static func decode(channel: String, payload: String) -> RelayNotification? {
        guard payload.utf8.count < maximumPayloadBytes else { return nil }
        let data = Data(payload.utf8)
        let decoder = JSONDecoder()
        if channel.hasPrefix(instanceChannelPrefix) {
            switch (try? decoder.decode(Kind.self, from: data))?.kind {
            case "answer"?:
                guard let answer = try? decoder.decode(AnswerNotification.self, from: data),
                      let cancel = try? decoder.decode(Cancel.self, from: data) else { return nil }
                return .answer(answer, cancel: cancel.cancel ?? false)
            case "locate"?:
                guard let ping = try? decoder.decode(LocateMessage.self, from: data),
                      let owner = try? decoder.decode(Owner.self, from: data) else { return nil }
                return .locate(ping, owner: owner.owner)
            case "cancel"?:
                return (try? decoder.decode(RequestID.self, from: data)).map { .cancel($0.id) }
            default:
                return nil
            }
        }
        switch channel {
        case "whereabot_replay":
            return (try? decoder.decode(RequestID.self, from: data)).map { .replay($0.id) }
        case "whereabot_device":
            return (try? decoder.decode(DeviceEvent.self, from: data)).map { .device($0.device, event: $0.event, connection: $0.connection) }
        case "whereabot_key":
            return (try? decoder.decode(KeyEvent.self, from: data)).map { .key($0.keyID) }
        default:
            return nil
        }
    }
}
