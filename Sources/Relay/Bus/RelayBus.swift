import Foundation
import PGBus

/// Routes the relay's notifications from the instance's one LISTEN connection to the parts
/// that act on them. Notifications are hints: every (re)start of LISTEN asks `maintenance`
/// for a full resync and makes the authenticator forget its cached sessions and keys.
struct RelayBus: Sendable {
    /// The channels instance `instance` listens on: its own and the broadcast ones.
    static func channels(of instance: String) -> [String] {
        [RelayNotification.channel(of: instance)] + RelayNotification.broadcastChannels
    }

    let instance: String
    let driver: InstanceDriver
    let authenticator: Authenticator
    let maintenance: RelayMaintenance
    /// The pushes this instance sends (a reminder it is named to push).
    let pushes: PushSender
    let logger: Logger

    /// Consumes the listener until it stops; `ready` is called once LISTEN is active.
    func run(listener: PGListener, ready: @escaping @Sendable () -> Void) async throws {
        try await listener.listen(on: Self.channels(of: instance)) { events in
            for await event in events {
                guard case .notification(let note) = event else {
                    // Listening (again): what was revoked meanwhile sent notifications nobody
                    // heard, so every cached credential is checked afresh.
                    await authenticator.forgetRevocable()
                    maintenance.requestResync()
                    ready()
                    continue
                }
                await dispatch(note)
            }
        }
    }

    private func dispatch(_ note: PGNotification) async {
        // Payloads come from our own functions, but they are still decoded defensively
        // (fuzzed by Fuzz/NotificationFuzz.swift): a malformed one is logged and skipped.
        guard let event = RelayNotification.decode(channel: note.channel, payload: note.payload) else {
            logger.warning("notification_malformed", ["channel": String(note.channel.prefix(64))])
            return
        }
        switch event {
        case .answer(let answer, let cancel):
            await driver.deliver(answer)
            if cancel { await driver.cancel(request: answer.id) }
        case .locate(let ping, let owner): await driver.ping(ping, owner: owner)
        case .cancel(let id): await driver.cancel(request: id)
        case .reminder(let reminder, let owner, let push):
            await driver.tell(owner: owner, reminder.phoneJSON)
            if push { await pushes.remind(reminder, owner: owner) }
        case .replay(let id): await driver.replay(id)
        case .device(let device, let owner, let kind, let connection):
            await driver.deviceEvent(device: device, owner: owner, event: kind, connection: connection)
        case .key(let id):
            await authenticator.dropKey(id: id)
            await driver.keyRevoked(id)
        }
    }
}
