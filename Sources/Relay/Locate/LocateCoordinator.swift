import Foundation

/// The waiting side of a locate: opens the request in Postgres, waits for the sealed
/// answer (delivered by the bus through `deliver`), and turns everything into an outcome.
/// The coordinator executes `WaiterState` (the calls waiting here and every decision about
/// them): each call, database result, answer, timer and hang-up is an event, and the
/// coordinator performs the actions the state returns.
///
/// Deadline: the phone's `expires_ms` plus `grace`, so that a phone's own `no_answer`
/// arrives as 408 rather than 504. A cancelled task (the agent hung up) abandons the
/// request, which cancels the pings. No answer by the deadline: 504 when a device got the
/// ping, else 503.
public actor LocateCoordinator {
    /// Time after `expires_ms` the waiter still waits for the phone's own answer.
    public static let defaultGrace: Duration = .seconds(2)
    /// Requests that may wait for one user's phones at once (the 429 cap).
    public static let defaultMaxWaiting = 5
    /// The owner's cap for tasks and async requests (each credential has its own cap of 20);
    /// a get_phone_location call keeps the owner's cap of synchronous requests.
    static let maxWaitingDurable = 100
    /// The cap for tasks and async requests made through a share: a viewer's agents keep at
    /// most this many prompts waiting on the owner's phone (and across every owner who
    /// shares with the viewer), so they can never bury the owner's own agents' requests.
    static let maxWaitingDurableShared = 5

    /// One locate as the agent asked it.
    public typealias Request = LocateRequest
    /// A request that keeps its result for the agent's token (SPEC §11).
    public typealias Resumable = LocateRequest.Resumable

    let instance: String
    let database: RelayDatabase
    let grace: Duration
    private let maxWaiting: Int
    let logger: Logger
    let pushes: PushScheduler?
    let timers: RelayTimers
    /// Every call waiting here, and every decision about them.
    private var state: WaiterState
    /// What each waiting call needs that is not a decision: its continuation, its reply key
    /// (to open a sealed fix) and where its ping goes.
    private var calls: [UUID: Call] = [:]
    /// Each waiting call's one timer (its current wait).
    private var waitTimers: [UUID: RelayTimers.Handle] = [:]
    /// Actions not performed yet, and whether a drain is performing them.
    private var queue: [WaiterState.Action] = []
    private var performing = false
    /// Polls of durable requests waiting here for an answer, by request and poll.
    var watchers: [UUID: [UUID: CheckedContinuation<Void, Never>]] = [:]
    /// Polls in progress here per request, and the requests whose answer arrived while one
    /// was reading the row (entries live only as long as a poll does).
    var polling: [UUID: Int] = [:]
    var woken: Set<UUID> = []
    /// Who waits for no call to wait here (a drain), each with the timer of its deadline.
    private var idleWaiters: [UUID: (continuation: CheckedContinuation<Void, Never>, deadline: RelayTimers.Handle)] = [:]

    private struct Call {
        let replyKey: ReplyKey
        let pinging: Pinging
        /// Set once the call waits.
        var continuation: CheckedContinuation<LocateOutcome, any Error>?
        /// How it ended, when that came before it waited.
        var completion: WaiterState.Completion?
    }

    /// Creates the coordinator of relay instance `instance`.
    public init(instance: String, database: RelayDatabase, grace: Duration = LocateCoordinator.defaultGrace,
                maxWaiting: Int = LocateCoordinator.defaultMaxWaiting, logger: Logger = Logger(level: .error)) {
        self.init(instance: instance, database: database, grace: grace, maxWaiting: maxWaiting, logger: logger, pushes: nil,
                  timers: RelayTimers(loop: nil))
    }

    /// Creates the coordinator with the push scheduler that wakes the owner's phones.
    init(instance: String, database: RelayDatabase, grace: Duration = LocateCoordinator.defaultGrace,
         maxWaiting: Int = LocateCoordinator.defaultMaxWaiting, logger: Logger, pushes: PushScheduler?,
         timers: RelayTimers = RelayTimers(loop: nil)) {
        self.pushes = pushes
        self.timers = timers
        self.logger = logger
        self.instance = instance
        self.database = database
        self.grace = grace
        self.maxWaiting = maxWaiting
        self.state = WaiterState(grace: grace)
    }

    /// Where the pings of requests this coordinator opens go: the database notifies every
    /// instance of a new request but the one that opened it, so the caller hands them to its
    /// own phones (its `DeviceHub`); the coordinator knows nothing of sockets. It runs where
    /// its caller runs (`nonisolated(nonsending)`): a ping goes from the coordinator to the
    /// hub in one hop, not through the global executor.
    public typealias Pinging = nonisolated(nonsending) @Sendable (_ ping: LocateMessage, _ owner: UUID) async -> Void

    /// Keeps `fix` for request `id` while a phone's answer on this instance is settled;
    /// false when the request does not wait here (then the fix must travel sealed).
    func settlingHere(_ id: UUID, fix: LocationFix) -> Bool {
        state.settlingHere(id, fix: fix)
    }

    /// The settle of a fix kept by `settlingHere` did not win (another answer did).
    func settledElsewhere(_ id: UUID) {
        state.settledElsewhere(id)
    }

    /// Requests waiting here now (for /metrics, resync and drain).
    public var waitingCount: Int { state.count }

    /// Returns once no request waits here, or after `limit`: a drain's wait, woken by the
    /// last call's end rather than polling.
    public func untilIdle(within limit: Duration) async {
        guard state.count > 0, limit > .zero else { return }
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
    public func deliver(_ answer: AnswerNotification) async {
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
    public func keyRevoked(_ key: UUID) async {
        for (id, waiter) in state.waiters where waiter.request.agentKey == key { await handle(.hungUp(id)) }
    }

    /// Asks the owner's phones and waits for the first answer.
    /// - Parameter pinging: where the request's ping goes for the owner's phones connected here.
    /// - Throws: database errors while opening (the caller answers 503).
    public func locate(_ request: Request, pinging: @escaping Pinging = { _, _ in }) async throws -> LocateOutcome {
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
            if let ping = opened.ping { await pinging(ping, request.owner) }
            await pushes?.opened(id, connections: opened.connections ?? 0, expires: expiresAt)
            return .waiting(expiresAt: expiresAt)
        }
        // The call's own task performs its first steps (the open, then the ping, the pushes
        // and the wait's timer): a locate makes no task of its own. It then waits for the
        // state to complete it.
        calls[id] = Call(replyKey: replyKey, pinging: pinging)
        var first = waiter
        first.hungUp = Task.isCancelled
        for action in state.handle(.called(id, first), now: .now) {
            guard case .open = action, let waiter = state.waiters[id] else {
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
            // Owner: the coordinator; the hang-up is one event, handled once the actor is free.
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
    /// their pings go through `pinging`).
    /// - Returns: how many rows were re-created.
    @discardableResult
    public func resync(pinging: @escaping Pinging = { _, _ in }) async throws -> Int {
        let ids = state.unanswered
        guard !ids.isEmpty else { return 0 }
        var states: [RelayDatabase.RequestState] = []
        for batch in ids.chunks(of: RelayDatabase.maxRequestStates) { states += try await database.requestStates(batch) }
        var recreated = 0
        for action in state.handle(.states(states, asked: ids, now: Date()), now: .now) {
            switch action {
            case .open(let id, again: true):
                guard let waiter = state.waiters[id] else { continue }
                let opened = try await open(id, waiter)
                guard opened.status == .opened else { continue }
                recreated += 1
                if let ping = opened.ping { await pinging(ping, waiter.request.owner) }
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

    private func handle(_ event: WaiterState.Event) async {
        state.handle(event, now: .now, into: &queue)
        await drain()
    }

    /// Performs the queued actions in the order the events produced them, across events:
    /// one drain at a time takes them from `queue` (a request's pushes never start after
    /// they were stopped, nor a ping go after its cancel). A database call runs in a task of
    /// its own and reports its result as the next event, so no drain waits for Postgres.
    /// Only a ping and the push scheduler are awaited; every other action is performed in place.
    private func drain() async {
        guard !performing else { return }
        performing = true
        var next = 0
        while next < queue.count {
            let action = queue[next]
            next += 1
            switch action {
            case .ping(let id, let ping, let owner):
                await calls[id]?.pinging(ping, owner)
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
        if state.count == 0, !idleWaiters.isEmpty { idleWaiters.keys.forEach(endIdleWait) }
    }

    /// Performs one action that needs no waiting (see `drain`).
    private func perform(_ action: WaiterState.Action) {
        let database = self.database, instance = self.instance
        switch action {
        case .open(let id, _):
            guard let waiter = state.waiters[id] else { return }
            call { try await self.open(id, waiter) } then: { .opened(id, $0) }
        case .ping, .pushesOpened, .pushesSettled:
            preconditionFailure("awaited by drain()")
        case .arm(let id, let wait, let delay):
            waitTimers.removeValue(forKey: id)?.cancel()
            waitTimers[id] = timers.after(delay) { [weak self] in await self?.handle(.timerFired(id, wait)) }
        case .cancelTimer(let id):
            waitTimers.removeValue(forKey: id)?.cancel()
        case .makeDurable(let id):
            call { try await database.makeDurable(id: id, instance: instance) } then: { .madeDurable(id, $0) }
        case .finish(let id, let abandoned):
            let logger = self.logger
            call { try await database.finish(id: id, instance: instance, abandoned: abandoned) } then: { result in
                if case .failure(let error) = result {
                    logger.failure(abandoned ? "abandon_failed" : "finish_failed", error, ["request": id.uuidString])
                }
                return .finished(id, result)
            }
        case .requestReplay(let ids):
            call { try await database.requestReplay(ids, instance: instance) } then: { _ in nil }
        case .wakePolls(let id):
            wakeWatchers(of: id)
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
    private func call<T: Sendable>(_ body: @escaping @Sendable () async throws -> T,
                                   then event: @escaping @Sendable (Result<T, any Error>) -> WaiterState.Event?) {
        // Owner: the coordinator, which waits for the event the result becomes (a call
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
