import Foundation
import PGBus

/// Routes the relay's notifications from the instance's one LISTEN connection to the parts
/// that act on them. Notifications are hints: every (re)start of LISTEN asks `maintenance`
/// for a full resync.
struct RelayBus: Sendable {
    /// The channels every instance listens on.
    static let channels = ["whereabot_locate", "whereabot_answer", "whereabot_cancel", "whereabot_device", "whereabot_key",
                           "whereabot_replay"]

    let coordinator: LocateCoordinator
    let hub: DeviceHub
    let authenticator: Authenticator
    let settler: AnswerSettler
    let maintenance: RelayMaintenance

    /// The owner of a `whereabot_locate` payload (the rest is a `LocateMessage`).
    private struct Owner: Decodable { let owner: UUID }

    /// A `whereabot_cancel` or `whereabot_replay` payload (only the id matters here).
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

    /// Consumes the listener until it stops; `ready` is called once LISTEN is active.
    func run(listener: PGListener, ready: @escaping @Sendable () -> Void) async throws {
        try await listener.listen(on: Self.channels) { events in
            for await event in events {
                guard case .notification(let note) = event else {
                    maintenance.requestResync()
                    ready()
                    continue
                }
                await dispatch(note)
            }
        }
    }

    private func dispatch(_ note: PGNotification) async {
        let data = Data(note.payload.utf8)
        let decoder = JSONDecoder()
        switch note.channel {
        case "whereabot_answer":
            if let answer = try? decoder.decode(AnswerNotification.self, from: data) { await coordinator.deliver(answer) }
        case "whereabot_locate":
            if let ping = try? decoder.decode(LocateMessage.self, from: data), let owner = try? decoder.decode(Owner.self, from: data) {
                await hub.locate(ping, owner: owner.owner)
            }
        case "whereabot_cancel":
            if let cancel = try? decoder.decode(RequestID.self, from: data) { await hub.cancel(request: cancel.id) }
        case "whereabot_replay":
            if let replay = try? decoder.decode(RequestID.self, from: data) { await settler.replay(replay.id) }
        case "whereabot_device":
            if let event = try? decoder.decode(DeviceEvent.self, from: data) {
                await hub.deviceEvent(device: event.device, event: event.event, connection: event.connection)
            }
        case "whereabot_key":
            if let key = try? decoder.decode(KeyEvent.self, from: data) { await authenticator.dropKey(id: key.keyID) }
        default:
            break
        }
    }
}
