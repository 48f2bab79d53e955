import Foundation

/// The waiting side of the driver, as the executor of `WaiterState` (the calls waiting here
/// and every decision about them): it opens the request in Postgres, pings the phones here
/// in place, waits for the answer (delivered by the bus through `deliver`, or settled here)
/// and turns everything into an outcome. Each call, database result, answer, timer and
/// hang-up is an event, and the driver performs the actions the value returns.
///
/// Deadline: the phone's `expires_ms` plus `grace`, so that a phone's own `no_answer`
/// arrives as 408 rather than 504. A cancelled task (the agent hung up) abandons the
/// request, which cancels the pings. No answer by the deadline: 504 when a device got the
/// ping, else 503.
extension InstanceDriver {
    /// Returns once no request waits here, or after `limit`: a drain's wait, woken by the
    /// last call's end rather than polling.
    func untilIdle(within limit: Duration) async {
        guard waiters.count > 0, limit > .zero else { return }
        let key = UUID()
        await withCheckedContinuation { continuation in
            idleWaiters[key] = (continuation, timers.after(limit) { await self.endIdleWait(key) })
        }
    }

    private func endIdleWait(_ key: UUID) {
        guard let waiter = idleWaiters.removeValue(forKey: key) else { return }
        waiter.deadline.cancel()
        waiter.continuation.resume()
    }

    /// An answer for this instance: its notification, or settled here (then with the fix
    /// it sealed, which saves opening it again).
    func deliver(_ answer: AnswerNotification) async {
        await deliver(answer, fix: nil)
    }

    func deliver(_ answer: AnswerNotification, fix: LocationFix?) async {
        guard answer.waiter == instance else { return }
        await handle(.answer(answer, fix: fix))
    }

    /// Agent key `key` was revoked (`whereabot_key`): every call of it waiting here ends as
    /// if its agent had hung up — the request is abandoned and its phones get `cancel` — so
    /// a revoked key's request stops prompting the person at once. (Its durable requests
    /// are abandoned by the database, which records their key.)
    func keyRevoked(_ key: UUID) async {
        for (id, waiter) in waiters.waiters where waiter.request.agentKey == key { await handle(.hungUp(id)) }
    }

    /// Asks the owner's phones and waits for the first answer.
    /// - Throws: database errors while opening (the caller answers 503).
    func locate(_ request: LocateRequest) async throws -> LocateOutcome {
        let id = request.resumable?.token.id ?? UUID()
        let replyKey = try request.resumable?.token.replyKey() ?? ReplyKey()
        let expiresAt = Date().addingTimeInterval(TimeInterval(request.timeout.components.seconds))
        let waiter = WaiterState.Waiter(request: request, publicKey: replyKey.publicKey, expiresAt: expiresAt,
                                        calledAt: .now)
        if let resumable = request.resumable, resumable.callBound == nil {
            // A task or an async HTTP request: opened, and nobody waits here.
            let opened = try await open(id, waiter, durable: true)
            if opened.status == .tooMany || opened.status == .full { return .failure(.tooManyWaiting) }
            if opened.status == .quiet, let quiet = opened.quiet {
                return .failure(.quietHours(name: quiet.name, until: quiet.until, local: quiet.local))  // answered at once
            }
            if let ping = opened.ping { await self.ping(ping, owner: request.owner) }
            await pushes?.opened(id, connections: opened.connections ?? 0, expires: expiresAt)
            return .waiting(expiresAt: expiresAt)
        }
        // The call's own task performs its first steps (the open, then the ping, the pushes
        // and the wait's timer): a locate makes no task of its own. It then waits for the
        // state to complete it.
        calls[id] = Call(replyKey: replyKey)
        var first = waiter
        first.hungUp = Task.isCancelled
        for action in waiters.handle(.called(id, first), now: .now) {
            guard case .open = action, let waiter = waiters.waiters[id] else {
                queue.append(action)
                await drain()
                continue
            }
            let result: Result<RelayDatabase.Opened, any Error>
            do { result = .success(try await open(id, waiter)) } catch { result = .failure(error) }
            await handle(.opened(id, result))
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
            // Owner: the driver; the hang-up is one event, handled once the actor is free.
            Task { await Logger.untraced { await self.handle(.hungUp(id)) } }
        }
    }

    private func resume(_ continuation: CheckedContinuation<LocateOutcome, any Error>, with completion: WaiterState.Completion,
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
    /// their pings go to the phones here).
    /// - Returns: how many rows were re-created.
    @discardableResult
    func resyncWaiters() async throws -> Int {
        let ids = waiters.unanswered
        guard !ids.isEmpty else { return 0 }
        var states: [RelayDatabase.RequestState] = []
        for batch in ids.chunks(of: RelayDatabase.maxRequestStates) { states += try await database.requestStates(batch) }
        var recreated = 0
        for action in waiters.handle(.states(states, asked: ids, now: Date()), now: .now) {
            switch action {
            case .open(let id, again: true):
                guard let waiter = waiters.waiters[id] else { continue }
                let opened = try await open(id, waiter)
                guard opened.status == .opened else { continue }
                recreated += 1
                if let ping = opened.ping { await self.ping(ping, owner: waiter.request.owner) }
            case .requestReplay(let batch):
                for ids in batch.chunks(of: RelayDatabase.maxReplays) { try await database.requestReplay(ids, instance: instance) }
            default:
                queue.append(action)
                await drain()
            }
        }
        return recreated
    }

    // MARK: Actions

    func handle(_ event: WaiterState.Event) async {
        waiters.handle(event, now: .now, into: &queue)
        await drain()
    }

    /// Performs the queued actions in the order the events produced them, across events:
    /// one drain at a time takes them from `queue` (a request's pushes never start after
    /// they were stopped, nor a ping go after its cancel). A database call runs in a task of
    /// its own and reports its result as the next event, so no drain waits for Postgres.
    /// Only the push scheduler is awaited (a ping is the phones' event, performed in place
    /// with sends alone); every other action is performed in place.
    private func drain() async {
        guard !performing else { return }
        performing = true
        var next = 0
        while next < queue.count {
            let action = queue[next]
            next += 1
            switch action {
            case .ping(let id, let ping, let owner):
                // The phones here, in place: the same actor, no hop.
                if calls[id] != nil { await self.ping(ping, owner: owner) }
            case .pushesOpened(let id, let connections, let expires):
                await pushes?.opened(id, connections: connections, expires: expires)
            case .pushesSettled(let id):
                await pushes?.settled(id)
            default:
                perform(action)
            }
        }
        // The queue keeps its storage between drains, unless a burst (a resync) grew it.
        if queue.capacity > 64 { queue = [] } else { queue.removeAll(keepingCapacity: true) }
        performing = false
        if waiters.count == 0, !idleWaiters.isEmpty { idleWaiters.keys.forEach(endIdleWait) }
    }

    /// Performs one action that needs no waiting (see `drain`).
    private func perform(_ action: WaiterState.Action) {
        let database = self.database, instance = self.instance
        switch action {
        case .open(let id, _):
            guard let waiter = waiters.waiters[id] else { return }
            databaseCall { try await self.open(id, waiter) } then: { .opened(id, $0) }
        case .ping, .pushesOpened, .pushesSettled:
            preconditionFailure("awaited by drain()")
        case .arm(let id, let wait, let delay):
            waitTimers.removeValue(forKey: id)?.cancel()
            waitTimers[id] = timers.after(delay) { [weak self] in await self?.handle(.timerFired(id, wait)) }
        case .cancelTimer(let id):
            waitTimers.removeValue(forKey: id)?.cancel()
        case .makeDurable(let id):
            databaseCall { try await database.makeDurable(id: id, instance: instance) } then: { .madeDurable(id, $0) }
        case .finish(let id, let abandoned):
            let logger = self.logger
            databaseCall { try await database.finish(id: id, instance: instance, abandoned: abandoned) } then: { result in
                if case .failure(let error) = result {
                    logger.failure(abandoned ? "abandon_failed" : "finish_failed", error, ["request": id.uuidString])
                }
                return .finished(id, result)
            }
        case .requestReplay(let ids):
            databaseCall { try await database.requestReplay(ids, instance: instance) } then: { _ in nil }
        case .wakePolls(let id):
            wakeWatchers(of: id)
        case .unexpected(let id, let event):
            logger.warning("waiter_event_unexpected", ["event": event, "request": id.uuidString])
        case .complete(let id, let completion):
            waitTimers.removeValue(forKey: id)?.cancel()
            guard let call = calls[id] else { return }
            guard let continuation = call.continuation else {
                calls[id]?.completion = completion  // its call is still on its first steps
                return
            }
            calls[id] = nil
            if calls.isEmpty { calls = [:] }
            resume(continuation, with: completion, replyKey: call.replyKey)
        }
    }

    /// Runs a database call in a task of its own; its result (its error included) comes
    /// back as the event `then` makes of it (nil: none).
    private func databaseCall<T: Sendable>(_ body: @escaping @Sendable () async throws -> T,
                                   then event: @escaping @Sendable (Result<T, any Error>) -> WaiterState.Event?) {
        // Owner: the driver, which waits for the event the result becomes (a call
        // that waits on it is resumed from there, a drain waits in `untilIdle`).
        Task(executorPreference: timers.loop) {
            await Logger.untraced {
                let result: Result<T, any Error>
                do { result = .success(try await body()) } catch { result = .failure(error) }
                if let event = event(result) { await self.handle(event) }
            }
        }
    }

    /// Inserts the request's row (notifying the other instances that hold the owner's
    /// phones); `exists` when it is there already.
    private func open(_ id: UUID, _ waiter: WaiterState.Waiter, durable: Bool = false) async throws -> RelayDatabase.Opened {
        if let resumable = waiter.request.resumable {
            let latest = waiter.expiresAt.addingTimeInterval(600)
            let keepUntil = resumable.ttl.map { ttl in
                min(latest, max(waiter.expiresAt, Date().addingTimeInterval(Double(ttl.components.seconds))))
            } ?? latest
            return try await database.openDurableRequest(
                id: id, owner: waiter.request.owner, requester: waiter.request.requester, binding: resumable.binding,
                clientName: waiter.request.clientName, instance: instance, replyKey: waiter.publicKey,
                expiresAt: waiter.expiresAt, keepUntil: keepUntil, durable: durable, wrappedSecret: resumable.wrapped,
                maxWaiting: resumable.callBound != nil ? maxWaiting
                    : waiter.request.requester == nil ? Self.maxWaitingDurable : Self.maxWaitingDurableShared,
                reason: waiter.request.reason)
        }
        return try await database.openRequest(
            id: id, owner: waiter.request.owner, requester: waiter.request.requester, clientID: waiter.request.clientID,
            clientName: waiter.request.clientName, instance: instance, replyKey: waiter.publicKey,
            expiresAt: waiter.expiresAt, maxWaiting: maxWaiting, reason: waiter.request.reason)
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
