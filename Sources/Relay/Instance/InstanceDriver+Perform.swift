import Foundation
import Lifecycle
import RelayCore

/// Events in, actions out: every event of the instance goes through `handle(_:)`, which
/// hands it to the value and performs the actions it returns, in order, each in
/// `performNow` (the ones that need no waiting) or `perform` (the ones awaited). Nothing
/// else changes the value, and nothing else performs an action.
///
/// Only what a socket's own message asked for is awaited (a settle, a token check, an
/// account request): it is performed before the socket's next event is handled, so a
/// phone's messages are answered in the order it sent them (docs/protocol.md, "The socket"). Everything else — a
/// waiting call's steps, its pushes, a batched call — is performed in place: a database
/// call, a push claim or a push send runs in a task of its own and reports its result as
/// the next event, so no event waits for Postgres or a push service except the one a
/// socket's own message asked for, and actions of one event are never overtaken by
/// another's.
extension InstanceDriver {
    /// Handles `event` and performs its actions in order. Those that need no waiting (most
    /// events have only such) are performed from `scratch` in place; from the first that is
    /// awaited on, the rest are taken out and performed by `perform`.
    func handle(_ event: Value.Event) async {
        value.handle(event, at: clock.now, into: &scratch)
        var next = 0
        while next < scratch.count, performNow(scratch[next]) { next += 1 }
        let rest = next < scratch.count ? Array(scratch[next...]) : []
        // The buffer keeps its storage between events, unless a burst (a drain, a resync) grew it.
        if scratch.capacity > 64 { scratch = [] } else { scratch.removeAll(keepingCapacity: true) }
        // After a hello's registration, the sockets' queued messages are handled here, not by
        // their own events: each socket's next event waits until they are (see `replaying`).
        var sockets = Set<UUID>()
        if case .phones(.hellosRegistered) = event { sockets = Set(rest.compactMap(\.socket)) }
        for connection in sockets where replaying[connection] == nil { replaying[connection] = [] }
        if rest.isEmpty {
            endIdleWaitsIfIdle()  // (no async call when nothing is left: most events)
        } else {
            await perform(rest)
        }
        for connection in sockets {
            for waiter in replaying.removeValue(forKey: connection) ?? [] { waiter.resume() }
        }
    }

    /// Performs the rest of an event's actions in order. The drain's wait ends with the
    /// last waiting call.
    private func perform(_ actions: [Value.Action]) async {
        for action in actions where !performNow(action) { await perform(action) }
        endIdleWaitsIfIdle()
    }

    /// Ends the drain's waits once no call waits here.
    private func endIdleWaitsIfIdle() {
        if !idleWaiters.isEmpty, value.waiters.attended == 0 { idleWaiters.keys.forEach(endIdleWait) }
    }

    /// Performs `action` when it needs no waiting; false (nothing done) when it must be
    /// awaited (`perform`).
    private func performNow(_ action: Value.Action) -> Bool {
        switch action {
        case .phones(let action):
            return performNow(action)
        case .waiters(.open):
            return false
        case .waiters(let action):
            performNow(action)
        case .push(let id, let action):
            performNow(action, of: id)
        case .pushSend(let id, let kind, let stage):
            send(kind, stage: stage, of: id)
        case .rememberSealed(let id, let sealed):
            sealedAnswers.remember(sealed, for: id)
        case .settleDone(let ticket, let result):
            settlements[ticket] = result
        case .openDurable, .fetchReplyKey, .seal, .settle:
            return false
        }
        return true
    }

    /// Performs an action that must be awaited. What a socket asked for (an account request,
    /// a token check, a settle) is awaited, so the socket's next message comes after it; so
    /// are the steps a call's own task or a resync performs (an open, a re-registration).
    private func perform(_ action: Value.Action) async {
        switch action {
        case .waiters(.open(let id, let again)):
            await open(id, again: again)
        case .openDurable(let id, let waiter):
            guard let request = calls[id]?.request else { return }
            await handle(.durableOpened(id, waiter, await catching { try await self.open(id, request, waiter, durable: true) }))
        case .fetchReplyKey(let settlement, let fix):
            let database = self.database
            await handle(.replyKey(settlement, fix, await catching {
                try await database.replyKey(request: settlement.id, user: settlement.user)
            }))
        case .seal(let settlement, let fix, let key):
            do {
                let sealed = try Sealing.seal(Array(fix.sealedJSON.utf8), to: key, requestID: settlement.id)
                await settle(settlement, .location(sealed: sealed))
            } catch {
                await handle(.settled(settlement, nil, .failure(error)))
            }
        case .settle(let settlement, let answer):
            await settle(settlement, answer)
        case .phones(.registerHellos(let batch, batched: false)):
            await reregister(batch)
        case .phones(.checkToken(let handle, let token)):
            await self.handle(.phones(.tokenChecked(handle, await check(token, of: handle.session))))
        case .phones(.account(let handle, let device, let request)):
            let wait = settingsBudget.take(connection: handle.connection, user: handle.user,
                                           now: clock.date.timeIntervalSince1970)
            guard wait == 0 else { return handle.session.send(SettingsBudget.refusal(retryAfter: wait)) }
            handle.session.send(await account.handle(request, user: handle.user, device: device))
        case .phones(.forgetSession(let id)):
            await authenticator.forgetSession(id)
        default:
            preconditionFailure("performed by performNow")
        }
    }

    // MARK: The phones' actions

    private func performNow(_ action: State.Action) -> Bool {
        switch action {
        case .send(let handle, let text):
            handle.session.send(text)
        case .close(let handle, let why):
            handle.session.close(code: why.code, reason: why.reason)
        case .registerHellos(_, batched: false):
            return false  // a resync's, one call after the other
        case .registerHellos(let batch, let batched):
            // Owner: `background` (`finish()` waits for it); the result comes back as the
            // event `hellosRegistered`.
            background.spawn(executorPreference: executor) {
                await Logger.untraced {
                    let result = await self.helloStatuses(batch)
                    await self.handle(.phones(.hellosRegistered(batch, result, batched: batched)))
                }
            }
        case .disconnect(let batch):
            batchCall(.disconnects, "device_disconnect_failed", batch.count) { try await $0.deviceDisconnects(batch) }
        case .markDelivered(let batch):
            batchCall(.deliveredMarks, "mark_delivered_failed", batch.count) { try await $0.markDelivered(batch) }
        case .armWindow(let call, let delay):
            _ = timers.after(delay) { await self.handle(.phones(.windowEnded(call))) }
        case .sendAlwaysAllowed(let handle):
            let account = self.account, session = handle.session
            // Owner: `background` (`finish()` waits for it); a socket closed meanwhile drops the send.
            background.spawn(executorPreference: executor) {
                for list in await account.lists(user: session.user) ?? [] { session.send(list) }
            }
        case .renewCredential(let handle, let expiry):
            handle.session.renewCredential(until: expiry)
        case .requestReregistration:
            reregistrationInput.yield()
        case .info(let event, let connection):
            logger.info(event, ["connection": connection.uuidString])
        case .warn(let event, let connection):
            logger.warning(event, ["connection": connection.uuidString])
        case .settle:
            preconditionFailure("the value turns a socket's answer into its settlement")
        case .checkToken, .account, .forgetSession:
            return false
        }
        return true
    }

    /// One disconnects or delivered-marks call in a task of its own; its end is an event.
    private func batchCall(_ call: State.Call, _ failure: String, _ count: Int,
                           _ body: @escaping @Sendable (RelayDatabase) async throws -> Void) {
        let database = self.database, logger = self.logger
        // Owner: `background` (`finish()` waits for it); its end is the event `batchSent`,
        // which lets the next batch go.
        background.spawn(executorPreference: executor) {
            await Logger.untraced {
                do { try await body(database) } catch { logger.failure(failure, error, ["count": String(count)]) }
                await self.handle(.phones(.batchSent(call)))
            }
        }
    }

    // MARK: The waiters' actions

    private func performNow(_ action: WaiterState.Action) {
        let database = self.database, instance = self.instance
        switch action {
        case .open:
            preconditionFailure("awaited by the task that asked (perform)")
        case .ping, .pushesOpened, .pushesSettled, .keptHere:
            preconditionFailure("the value turns them into events of its phones, its pushes and its settles")
        case .recreated:
            resyncTally.recreated += 1
        case .reopenFailed(let id, let error):
            logger.failure("reopen_failed", error, ["request": id.uuidString])
            resyncTally.failure = error
        case .arm(let id, let wait, let delay):
            waitTimers.removeValue(forKey: id)?.cancel()
            waitTimers[id] = timers.after(delay) { [weak self] in await self?.handle(.waiters(.timerFired(id, wait))) }
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
            let logger = self.logger
            databaseCall {
                for batch in ids.chunks(of: RelayDatabase.maxReplays) { try await database.requestReplay(batch, instance: instance) }
            } then: { result in
                if case .failure(let error) = result { logger.failure("request_replay_failed", error, ["count": String(ids.count)]) }
                return nil
            }
        case .wakePolls(let id):
            wakeWatchers(of: id)
        case .unexpected(let id, let event):
            // Counted with every warning (`whereabot_failures_total{event="waiter_event_unexpected"}`).
            logger.warning("waiter_event_unexpected", ["event": event, "request": id.uuidString])
        case .complete(let id, let completion):
            waitTimers.removeValue(forKey: id)?.cancel()
            guard let call = calls[id] else { break }
            guard let continuation = call.continuation else {
                calls[id]?.completion = completion  // its call is still on its first steps
                break
            }
            calls[id] = nil
            if calls.isEmpty, calls.capacity > 64 { calls = [:] }  // a surge's table is given back, a small one kept
            resume(continuation, with: completion, replyKey: call.replyKey)
        }
    }

    // MARK: The pushes' actions

    private func performNow(_ action: PushPlan.Action, of id: UUID) {
        guard let pushes else { return }  // without a sender the value plans no pushes
        switch action {
        case .arm(let stage, let at):
            let delay = Duration.milliseconds(Int(max(0, at.timeIntervalSince(clock.date)) * 1000))
            pushRuns.arm(id, timers.after(delay) { [weak self] in await self?.handle(.pushTimerFired(id, stage)) })
        case .claim(let stage):
            guard !pushRuns.finished else { return }
            // Owner: `background` (`finish()` waits for it); the claim's result is the event
            // `pushClaimed`.
            background.spawn(executorPreference: executor) {
                await Logger.untraced {
                    let (result, claim) = await pushes.claim(id, stage: stage)
                    await self.claimed(id, stage, result, claim)
                }
            }
        case .send:
            preconditionFailure("the value plans a send as pushSend")
        case .done:
            pushRuns.done(id)
        }
    }

    /// A push claim came back: what it claimed is kept for the send, and the plan decides.
    private func claimed(_ id: UUID, _ stage: PushPlan.Stage, _ result: PushPlan.ClaimResult, _ claim: PushClaim?) async {
        guard value.pushes[id] != nil else { return }
        pushRuns.claimed(id, claim)
        await handle(.pushClaimed(id, stage, result))
    }

    /// Sends a claimed push after the request's earlier sends (the checking alert never
    /// overtakes the wake).
    private func send(_ kind: PushPlan.Kind, stage: PushPlan.Stage, of id: UUID) {
        guard let pushes, let claim = pushRuns.claim(of: id), !pushRuns.finished else { return }
        pushRuns.send(id) { previous, number in
            // Owners: `background` (`finish()` waits for it) and `pushRuns`, which keeps it
            // until it ends or a newer send of the request replaces it (that one waits for it).
            background.spawn(executorPreference: executor) {
                await Logger.untraced {
                    await previous?.value
                    await pushes.send(kind, stage: stage, request: id, claim: claim)
                    await self.sent(id, number)
                }
            }
        }
    }

    private func sent(_ id: UUID, _ number: Int) {
        pushRuns.sent(id, number)
    }

    /// Runs a database call in a task of its own; its result (its error included) comes
    /// back as the event `then` makes of it (nil: none).
    private func databaseCall<T: Sendable>(_ body: @escaping @Sendable () async throws -> T,
                                           then event: @escaping @Sendable (Result<T, any Error>) -> WaiterState.Event?) {
        // Owner: `background` (`finish()` waits for it); the result is the next event, which
        // resumes a call that waits on it. Once finished (the pool is about to stop) the call
        // is not made, and its event says so at once: no call waits for a result that never
        // comes.
        let started = background.spawn(executorPreference: timers.loop) {
            await Logger.untraced {
                let result: Result<T, any Error>
                do { result = .success(try await body()) } catch { result = .failure(error) }
                if let event = event(result) { await self.handle(.waiters(event)) }
            }
        }
        if started == nil, let event = event(.failure(CancellationError())) {
            // Owner: `timers.events`, which the instance's shutdown finishes last.
            timers.events.spawn(executorPreference: timers.loop) { await self.handle(.waiters(event)) }
        }
    }
}

private extension Instance.Action {
    /// The socket whose own message this awaited action answers; nil for the others.
    var socket: UUID? {
        switch self {
        case .settle(let settlement, _), .seal(let settlement, _, _), .fetchReplyKey(let settlement, _):
            if case .socket(let answer) = settlement.origin { answer.record.handle.connection } else { nil }
        case .phones(.checkToken(let handle, _)), .phones(.account(let handle, _, _)): handle.connection
        default: nil
        }
    }
}

private extension PhoneHandle {
    /// The socket behind a handle of the value's actions: the driver gives the value only
    /// `DeviceSession`s (`handle(_:from:)`), so every handle it gets back is one.
    var session: DeviceSession { unsafeDowncast(self, to: DeviceSession.self) }
}
