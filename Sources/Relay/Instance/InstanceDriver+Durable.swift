import Foundation
import RelayCore

/// Polls, cancels and lists of durable requests (docs/protocol.md, "Durable requests"): any instance answers them. A
/// poll that may wait asks Postgres to tell this instance of the answer (`watch`) and
/// sleeps until it comes, the wait runs out, or a backstop re-reads the row.
extension InstanceDriver {
    /// What a poll found.
    enum Poll: Sendable, Equatable {
        /// No such request for this credential (never opened, another's, or past its TTL).
        case unknown
        /// Still open.
        case waiting(RelayDatabase.DurableState)
        /// Ended: how, and the outcome as a first call would have returned it.
        case settled(RelayDatabase.DurableState, LocateOutcome)
    }

    /// The longest a waiting poll sleeps before it reads the row again (a missed
    /// notification, another instance's poll taking over the watch).
    static let pollBackstop: Duration = .seconds(5)
    /// How often a poll reads again while the request it names is still being opened here.
    static let openingRecheck: Duration = .milliseconds(50)

    /// Reads request `token` for `binding`, waiting up to `wait` for it to end.
    /// - Parameter email: the credential's email, for the 503 text of a request no phone got.
    /// - Throws: database errors (503 for the caller).
    func poll(_ token: RequestToken, binding: RelayDatabase.Binding, wait: Duration, email: String?) async throws -> Poll {
        let until = clock.instant + wait
        let id = token.id
        // An answer that arrives while the row is being read must not be missed: it marks
        // the request woken, and the poll reads again instead of sleeping.
        polls.pollStarted(id)
        defer { polls.pollEnded(id) }
        while true {
            let remaining = until - clock.instant
            polls.reading(id)
            guard let state = try await database.durableState(id: id, binding: binding, instance: instance,
                                                              watch: remaining > .zero) else {
                // Opened here a moment ago and not committed yet (a slow open, under load): its
                // row appears when the open commits. An agent's next ask that joins it waits
                // for that rather than finding nothing and asking the person a second time.
                if remaining > .zero, !Task.isCancelled, value.waiters.waiters[id]?.isOpening == true {
                    await watch(id, for: min(remaining, Self.openingRecheck))
                    continue
                }
                return .unknown
            }
            if !state.waiting { return .settled(state, outcome(of: state, token: token, email: email)) }
            guard remaining > .zero, !Task.isCancelled else { return .waiting(state) }
            if polls.wasWoken(id) { continue }
            // Past the deadline and its grace the next read settles it as expired.
            let dueIn = Duration.milliseconds(Int(state.expiresAt.timeIntervalSince(clock.date) * 1000)) + grace + .milliseconds(50)
            await watch(id, for: min(remaining, Self.pollBackstop, max(dueIn, .milliseconds(50))))
        }
    }

    /// Cancels request `token` (its phones get `cancel`). `forget` deletes it and its result
    /// as well (HTTP DELETE).
    func cancel(_ token: RequestToken, binding: RelayDatabase.Binding, forget: Bool) async throws -> RelayStatus.CancelDurable {
        let status = try await database.cancelDurable(id: token.id, binding: binding, forget: forget)
        if status == .cancelled { wakeWatchers(of: token.id) }
        return status
    }

    /// Sleeps until `id`'s answer reaches this instance, `duration` passes, or the task is cancelled.
    private func watch(_ id: UUID, for duration: Duration) async {
        let key = UUID()
        let timer = timers.after(duration) { [weak self] in await self?.stopWatching(id, key) }
        defer { timer.cancel() }
        await withTaskCancellationHandler {
            await withCheckedContinuation { continuation in
                if Task.isCancelled { continuation.resume() } else { polls.sleep(id, key, continuation) }
            }
        } onCancel: {
            // Owner: `background`; it resumes the poll's continuation once, here or at the
            // answer (its timer resumes it otherwise).
            background.spawn(executorPreference: executor) { await self.stopWatching(id, key) }
        }
    }

    private func stopWatching(_ id: UUID, _ key: UUID) {
        polls.stop(id, key)?.resume()
    }

    /// Wakes every poll waiting here for `id` (its answer or cancel arrived), and marks it
    /// woken for a poll that is reading its row right now.
    func wakeWatchers(of id: UUID) {
        for continuation in polls.wake(id) { continuation.resume() }
    }

    /// The outcome of an ended durable request, as its first call would have returned it.
    func outcome(of state: RelayDatabase.DurableState, token: RequestToken, email: String?) -> LocateOutcome {
        switch state.outcome {
        case .expired?:
            return state.delivered ? .failure(.phoneSilent) : .failure(.notConnected(email: email))
        case .abandoned?:
            return .abandoned
        case .location?, .denied?, .unavailable?, nil:
            guard let replyKey = try? token.replyKey() else { return .failure(.noFix) }
            let answer = AnswerNotification(id: state.id, waiter: instance, outcome: state.outcome ?? .unavailable,
                                            reason: state.reason, sealed: state.sealed)
            return outcome(of: answer, replyKey: replyKey)
        }
    }
}
