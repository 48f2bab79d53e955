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

    /// The most notifications handed to the driver in one call.
    static let batch = 256

    /// Consumes the listener until it stops; `ready` is called once LISTEN is active.
    /// Notifications come in batches (every one buffered when the bus looks, up to
    /// `batch`), and the driver's share of a batch goes to it in one call (one change of
    /// executor for a burst rather than two per notification), in the order they came.
    func run(listener: PGListener, ready: @escaping @Sendable () -> Void) async throws {
        try await listener.listen(on: Self.channels(of: instance)) { events in
            var iterator = events.makeAsyncIterator()
            var forDriver: [RelayNotification] = []
            while let batch = await iterator.nextBatch(maximum: Self.batch) {
                for event in batch {
                    guard case .notification(let note) = event else {
                        await hand(&forDriver)
                        // Listening (again): what was revoked meanwhile sent notifications nobody
                        // heard, so every cached credential is checked afresh.
                        await authenticator.forgetRevocable()
                        maintenance.requestResync()
                        ready()
                        continue
                    }
                    // Payloads come from our own functions, but they are still decoded
                    // defensively (fuzzed by Fuzz/NotificationFuzz.swift): a malformed one is
                    // logged and skipped.
                    guard let decoded = RelayNotification.decode(channel: note.channel, payload: note.payload) else {
                        logger.warning("notification_malformed", ["channel": String(note.channel.prefix(64))])
                        continue
                    }
                    switch decoded {
                    case .key(let id):
                        // The cached key goes first: no call of it gets in while its calls end.
                        await hand(&forDriver)
                        await authenticator.dropKey(id: id)
                        forDriver.append(decoded)
                    case .reminder(let reminder, let owner, true):
                        forDriver.append(decoded)
                        await hand(&forDriver)
                        await pushes.remind(reminder, owner: owner)
                    default:
                        forDriver.append(decoded)
                    }
                }
                await hand(&forDriver)
            }
        }
    }

    /// Hands the notifications gathered for the driver to it, in one call.
    private func hand(_ notifications: inout [RelayNotification]) async {
        guard !notifications.isEmpty else { return }
        await driver.notified(notifications)
        // The driver keeps none of them: the buffer is this bus's again, storage and all.
        notifications.removeAll(keepingCapacity: notifications.capacity <= Self.batch)
    }
}
