import Foundation

/// One notification of the relay's channels, decoded from its JSON payload; nil for a
/// channel the relay does not know or a payload that does not fit its channel.
enum RelayNotification: Sendable, Equatable {
    /// `whereabot_answer`: a settled request for its waiter.
    case answer(AnswerNotification)
    /// `whereabot_locate`: a new request for the owner's phones.
    case locate(LocateMessage, owner: UUID)
    /// `whereabot_cancel`: the request was settled or expired.
    case cancel(UUID)
    /// `whereabot_replay`: send a sealed answer again.
    case replay(UUID)
    /// `whereabot_device`: a device said hello elsewhere or was revoked.
    case device(UUID, event: String, connection: UUID?)
    /// `whereabot_key`: an agent key was revoked.
    case key(UUID)

    private struct Owner: Decodable { let owner: UUID }
    private struct RequestID: Decodable { let id: UUID }
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
        switch channel {
        case "whereabot_answer":
            return (try? decoder.decode(AnswerNotification.self, from: data)).map(RelayNotification.answer)
        case "whereabot_locate":
            guard let ping = try? decoder.decode(LocateMessage.self, from: data),
                  let owner = try? decoder.decode(Owner.self, from: data) else { return nil }
            return .locate(ping, owner: owner.owner)
        case "whereabot_cancel":
            return (try? decoder.decode(RequestID.self, from: data)).map { .cancel($0.id) }
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
