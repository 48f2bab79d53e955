import Crypto
import Foundation
import RelayCore

/// The agents' calls (the waiters' side of the instance's value): the driver opens the
/// request in Postgres, the phones here are pinged in the event that saw it opened, and the
/// call waits for the answer (delivered by the bus through `deliver`, or settled here) and
/// turns everything into an outcome. Each call, database result, answer, timer and hang-up
/// is an event, and the driver performs the actions the value returns.
///
/// Deadline: the phone's `expires_ms` plus `grace`, so that a phone's own `no_answer`
/// arrives as 408 rather than 504. A cancelled task (the agent hung up) is not a refusal:
/// the request stays open for the person (a resumable one is made durable); a withdrawal
/// (an explicit cancel, a revoked key) abandons it, which cancels the pings. No answer by
/// the deadline: 504 when a device got the ping, else 503.
extension InstanceDriver {
    /// Returns once no call waits here for its caller, or after `limit`: a drain's wait,
    /// woken by the last call's end rather than polling.
    func untilIdle(within limit: Duration) async {
        guard value.waiters.attended > 0, limit > .zero else { return }
        let key = UUID()
        await withCheckedContinuation { continuation in
            idleWaiters[key] = (continuation, timers.after(limit) { await self.endIdleWait(key) })
        }
    }

    /// The drain is over: every call still here ends at once as `RelayError.draining` (a
    /// caller who hung up keeps its call only for the calls that join it, and one still
    /// waiting past the drain's deadline is told to retry), so that no request's task
    /// outlives the instance's stop.
    func endCalls() async {
        await handle(.waiters(.stopping(RelayError.draining)))
    }

    func endIdleWait(_ key: UUID) {
        guard let waiter = idleWaiters.removeValue(forKey: key) else { return }
        waiter.deadline.cancel()
        waiter.continuation.resume()
    }

    /// An answer's notification for this instance (an answer settled here reaches its call
    /// in the settle's own result event, `settled`).
    func deliver(_ answer: AnswerNotification) async {
        guard answer.waiter == instance else { return }
        await handle(.waiters(.answer(answer, fix: nil)))
    }

    /// Agent key `key` was revoked (`whereabot_key`): every call of it waiting here ends as
    /// if its agent had hung up — the request is abandoned and its phones get `cancel` — so
    /// a revoked key's request stops prompting the person at once. (Its durable requests
    /// are abandoned by the database, which records their key.)
    func keyRevoked(_ key: UUID) async {
        for (id, call) in calls where call.request.agentKey == key { await handle(.waiters(.withdrawn(id))) }
    }

    /// Withdraws the call waiting here for request `id` (an explicit cancel): abandoned, its
    /// phones get `cancel`. False when no call waits here for it.
    func withdraw(_ id: UUID) async -> Bool {
        guard value.waiters.waiters[id] != nil else { return false }
        await handle(.waiters(.withdrawn(id)))
        return true
    }

    /// Asks the owner's phones and waits for the first answer.
    /// - Throws: database errors while opening (the caller answers 503).
    func locate(_ request: LocateRequest) async throws -> LocateOutcome {
        let id = request.resumable?.token.id ?? RandomUUID.make()
        let replyKey = try request.resumable?.token.replyKey() ?? ReplyKey()
        let now = clock.now
        var waiter = WaiterState.Waiter(request: request, publicKey: replyKey.publicKey,
                                        expiresAt: now.date.addingTimeInterval(TimeInterval(request.timeout.components.seconds)),
                                        calledAt: now.instant)
        // The call's own task performs its first steps (the open, then the ping, the pushes
        // and the wait's timer, each an action of the event before): a locate makes no task
        // of its own. It then waits for the value to complete it.
        calls[id] = Call(request: request, replyKey: replyKey)
        if let resumable = request.resumable, resumable.callBound == nil {
            // A task or an async HTTP request: opened, and nobody waits here.
            await handle(.durableCalled(id, waiter))
        } else {
            // Gone before it began: the person is still asked (a hang-up is not a refusal).
            waiter.callerGone = Task.isCancelled
            await handle(.waiters(.called(id, waiter)))
        }
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { continuation in
                guard let completion = calls[id]?.completion else {
                    calls[id]?.continuation = continuation
                    return
                }
                let call = calls.removeValue(forKey: id)!
                resume(continuation, with: completion, replyKey: call.replyKey)
            }
        } onCancel: {
            // Owner: `background`; the hang-up is one event, handled once the actor is free
            // (none after the instance finished: nothing waits then).
            background.spawn(executorPreference: executor) { await Logger.untraced { await self.handle(.waiters(.hungUp(id))) } }
        }
    }

    /// Opens the row of the call waiting for request `id` (`again`: re-creates it after a
    /// crash) and reports the result as the waiters' event. A request is asked even when its
    /// caller leaves before (or, resumable, during) the open: a hang-up is not a refusal, so
    /// then the open runs in a task the hang-up does not cancel (owner: this step, which
    /// awaits it).
    func open(_ id: UUID, again: Bool) async {
        guard let waiter = value.waiters.waiters[id], let request = calls[id]?.request else { return }
        let result: Result<RelayDatabase.Opened, any Error>
        if request.resumable != nil || waiter.callerGone {
            let open = Task(executorPreference: executor) { try await self.open(id, request, waiter) }
            result = await catching { try await open.value }
        } else {
            result = await catching { try await self.open(id, request, waiter) }
        }
        await handle(.waiters(again ? .reopened(id, result) : .opened(id, result)))
    }

    func resume(_ continuation: CheckedContinuation<LocateOutcome, any Error>, with completion: WaiterState.Completion,
                replyKey: ReplyKey) {
        switch completion {
        case .failed(let error): continuation.resume(throwing: error)
        case .outcome(let outcome): continuation.resume(returning: outcome)
        case .answered(let answer, let fix): continuation.resume(returning: outcome(of: answer, replyKey: replyKey, fix: fix))
        }
    }

    /// Re-reads the rows of every request still waiting here (after a LISTEN reconnect, and
    /// as a slow backstop poll): answers whose notification was lost are delivered (a
    /// sealed fix is asked for again from the instance that sealed it), requests reaped
    /// meanwhile wake their waiters, and rows lost in a Postgres crash are re-created (and
    /// their pings go to the phones here) — all as the one event `states`, whose re-opens
    /// this task performs.
    /// - Returns: how many rows were re-created.
    /// - Throws: the first failure to read or re-create a row (the next resync tries again).
    @discardableResult
    func resyncWaiters() async throws -> Int {
        let ids = value.waiters.unanswered
        guard !ids.isEmpty else { return 0 }
        var states: [RelayDatabase.RequestState] = []
        for batch in ids.chunks(of: RelayDatabase.maxRequestStates) { states += try await database.requestStates(batch) }
        resyncTally = ResyncTally()
        await handle(.waiters(.states(states, asked: ids)))
        if let failure = resyncTally.failure { throw failure }
        return resyncTally.recreated
    }

    // MARK: What the actions need

    /// Inserts the request's row (notifying the other instances that hold the owner's
    /// phones); `exists` when it is there already.
    func open(_ id: UUID, _ request: LocateRequest, _ waiter: WaiterState.Waiter, durable: Bool = false) async throws
        -> RelayDatabase.Opened {
        if let resumable = request.resumable {
            let latest = waiter.expiresAt.addingTimeInterval(600)
            let keepUntil = resumable.ttl.map { ttl in
                min(latest, max(waiter.expiresAt, clock.date.addingTimeInterval(Double(ttl.components.seconds))))
            } ?? latest
            return try await database.openDurableRequest(
                id: id, owner: request.owner, requester: request.requester, binding: resumable.binding,
                clientName: request.clientName, instance: instance, replyKey: waiter.publicKey,
                expiresAt: waiter.expiresAt, keepUntil: keepUntil, durable: durable, wrappedSecret: resumable.wrapped,
                maxWaiting: resumable.callBound != nil ? maxWaiting
                    : request.requester == nil ? Self.maxWaitingDurable : Self.maxWaitingDurableShared,
                reason: request.reason)
        }
        return try await database.openRequest(
            id: id, owner: request.owner, requester: request.requester, clientID: request.clientID,
            clientName: request.clientName, instance: instance, replyKey: waiter.publicKey,
            expiresAt: waiter.expiresAt, maxWaiting: maxWaiting, reason: request.reason)
    }

    /// The outcome an answer means for the agent (a sealed fix is opened with `replyKey`;
    /// a fix answered here comes as `local`).
    func outcome(of answer: AnswerNotification, replyKey: ReplyKey, fix local: LocationFix? = nil) -> LocateOutcome {
        switch (answer.outcome, answer.reason) {
        case (.location, _):
            if let local { return local.isPlausible ? .fix(local) : .failure(.noFix) }
            guard let sealed = answer.sealed,
                  let plaintext = try? replyKey.open(sealed, requestID: answer.id),
                  let fix = LocationFix(sealedJSON: String(decoding: plaintext, as: UTF8.self)),
                  fix.isPlausible else { return .failure(.noFix) }
            return .fix(fix)
        case (.denied, "no_answer"): return .failure(.noAnswer)
        case (.denied, _): return .failure(.declined)
        case (.unavailable, "permission"): return .failure(.permissionOff)
        default: return .failure(.noFix)
        }
    }
}
