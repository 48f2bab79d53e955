import Foundation
import PGBus

/// The hub's three batched database calls — hellos (`relay.device_hellos`), disconnects
/// (`relay.device_disconnects`) and delivered marks (`relay.mark_delivered`) — performed as
/// their `CallBatcher`s decide.
extension DeviceHub {
    /// The three batched calls.
    enum Call: Sendable {
        case hellos, disconnects, deliveredMarks
    }

    /// What happened to a batcher.
    private enum BatchEvent: Sendable {
        case windowEnded, sent
    }

    /// Performs the hello batcher's actions (a batch goes through `register`).
    func perform(_ actions: [CallBatcher<Hello>.Action]) {
        for action in actions {
            switch action {
            case .armTimer(let delay): arm(.hellos, after: delay)
            case .send(let batch):
                Task(executorPreference: executor) {
                    await self.register(batch)
                    await self.batcher(.hellos, .sent)
                }
            }
        }
    }

    /// Performs the disconnects' or delivered marks' batcher's actions.
    func perform(_ actions: [CallBatcher<UUID>.Action], _ call: Call) {
        for action in actions {
            switch action {
            case .armTimer(let delay): arm(call, after: delay)
            case .send(let batch):
                Task(executorPreference: executor) {
                    await self.make(call, batch)
                    await self.batcher(call, .sent)
                }
            }
        }
    }

    private func arm(_ call: Call, after delay: Duration) {
        _ = timers.after(delay) { await self.batcher(call, .windowEnded) }
    }

    private func batcher(_ call: Call, _ event: BatchEvent) {
        switch (call, event) {
        case (.hellos, .windowEnded): perform(hellos.windowEnded())
        case (.hellos, .sent): perform(hellos.sent())
        case (.disconnects, .windowEnded): perform(disconnects.windowEnded(), call)
        case (.disconnects, .sent): perform(disconnects.sent(), call)
        case (.deliveredMarks, .windowEnded): perform(delivered.windowEnded(), call)
        case (.deliveredMarks, .sent): perform(delivered.sent(), call)
        }
    }

    /// One disconnects or delivered-marks call (hellos go through `register`).
    private func make(_ call: Call, _ batch: [UUID]) async {
        do {
            switch call {
            case .disconnects:
                try await database.deviceDisconnects(batch)
            case .deliveredMarks:
                // Pings answered or cancelled meanwhile need no mark.
                let waiting = batch.filter(pings.contains)
                if !waiting.isEmpty { try await database.markDelivered(waiting) }
            case .hellos:
                break
            }
        } catch {
            logger.failure(call == .disconnects ? "device_disconnect_failed" : "mark_delivered_failed", error,
                           ["count": String(batch.count)])
        }
    }

    /// `relay.device_hellos` of `batch`, with one element's failure kept to itself: when
    /// the database refuses the call (a server error, such as a device row inserted past the
    /// cap through the API at the same moment), the batch is halved until the hello that
    /// fails stands alone, and only that socket is `failed` (1011 "try again").
    /// Nil when the database could not be reached at all.
    func helloStatuses(_ batch: [Hello]) async -> RelayDatabase.HelloBatch? {
        do {
            return try await database.deviceHellos(instance: instance, batch.map(\.database))
        } catch let error as PGError where error.code == .server {
            guard batch.count > 1 else {
                logger.failure("device_hello_refused", error, ["connection": batch[0].session.connection.uuidString])
                return RelayDatabase.HelloBatch(statuses: [:], failed: [batch[0].session.connection], pending: [])
            }
            logger.warning("device_hello_batch_split", ["sockets": String(batch.count), "sqlstate": error.sqlState ?? ""])
            var statuses: [UUID: RelayStatus.Hello] = [:]
            var failed = Set<UUID>()
            var pending: [(owner: UUID, ping: LocateMessage)] = []
            var sent = Set<UUID>()  // a user's waiting pings come back from each half that holds the user
            for half in [Array(batch[..<(batch.count / 2)]), Array(batch[(batch.count / 2)...])] {
                guard let part = await helloStatuses(half) else {
                    failed.formUnion(half.map(\.session.connection))
                    continue
                }
                statuses.merge(part.statuses) { first, _ in first }
                failed.formUnion(part.failed)
                for entry in part.pending where sent.insert(entry.ping.id).inserted { pending.append(entry) }
            }
            return RelayDatabase.HelloBatch(statuses: statuses, failed: failed, pending: pending)
        } catch {
            logger.failure("device_hello_failed", error, ["sockets": String(batch.count)])
            return nil
        }
    }
}
