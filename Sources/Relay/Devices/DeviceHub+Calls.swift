import Foundation

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
}
