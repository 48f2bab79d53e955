import Foundation

/// The waiting side of a locate: opens the request in Postgres, waits for the sealed
/// answer (delivered by the bus through `deliver`), and turns everything into an outcome.
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

    /// One locate as the agent asked it.
    public struct Request: Sendable {
        /// Whose phones to ask.
        public var owner: UUID
        /// Who asks, when it is someone else (location sharing).
        public var requester: UUID?
        /// The asking agent's client id.
        public var clientID: String
        /// The agent's name, for pushes.
        public var clientName: String?
        /// The credential's email, for the 503 text.
        public var email: String?
        /// How long the phone has to answer.
        public var timeout: Duration
        /// How the request outlives its call, when it may (nil: a synchronous request).
        public var resumable: Resumable?

        /// Creates a request.
        public init(owner: UUID, requester: UUID? = nil, clientID: String, clientName: String? = nil,
                    email: String? = nil, timeout: Duration, resumable: Resumable? = nil) {
            self.owner = owner
            self.requester = requester
            self.clientID = clientID
            self.clientName = clientName
            self.email = email
            self.timeout = timeout
            self.resumable = resumable
        }
    }

    /// A request that keeps its result for the agent's token (SPEC §11).
    public struct Resumable: Sendable {
        /// The agent's request_id: the row id and the reply key come from it.
        public var token: RequestToken
        /// Who may come back for it.
        public var binding: RelayDatabase.Binding
        /// How long the call itself waits before it answers "still waiting" (nil: not at
        /// all, a task or an async HTTP request, durable from the start).
        public var callBound: Duration?
        /// The result's TTL from creation (a task's `ttl`), cut to the deadline plus 10 minutes.
        public var ttl: Duration?
        /// The token's secret wrapped for tasks/list, if it is a task and a key is configured.
        public var wrapped: [UInt8]?

        /// Describes a resumable request.
        public init(token: RequestToken, binding: RelayDatabase.Binding, callBound: Duration?, ttl: Duration? = nil,
                    wrapped: [UInt8]? = nil) {
            self.token = token
            self.binding = binding
            self.callBound = callBound
            self.ttl = ttl
            self.wrapped = wrapped
        }
    }

    let instance: String
    let database: RelayDatabase
    let grace: Duration
    private let maxWaiting: Int
    let logger: Logger
    let pushes: PushScheduler?
    let timers: RelayTimers
    private var waiters: [UUID: Waiter] = [:]
    /// Polls of durable requests waiting here for an answer, by request and poll.
    var watchers: [UUID: [UUID: CheckedContinuation<Void, Never>]] = [:]
    /// Polls in progress here per request, and the requests whose answer arrived while one
    /// was reading the row (entries live only as long as a poll does).
    var polling: [UUID: Int] = [:]
    var woken: Set<UUID> = []

    /// One request waiting here: what re-creates its row after a crash, and its answer.
    private struct Waiter {
        let request: Request
        let replyKey: [UInt8]
        let expiresAt: Date
        /// A resumable request's fix always comes sealed (the agent may fetch it elsewhere).
        var resumable: Bool { request.resumable != nil }
        var continuation: CheckedContinuation<AnswerNotification?, Never>?
        var answer: AnswerNotification?
        /// The fix itself when the phone answered on this instance (no need to open it).
        var fix: LocationFix?
        /// A fix answered here and being settled (not sealed: it never crosses Postgres);
        /// resync delivers it when the settle committed but its result was lost.
        var settlingFix: LocationFix?
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
    }

    /// Where the pings of requests this coordinator opens go: the database notifies every
    /// instance of a new request but the one that opened it, so the caller hands them to its
    /// own phones (its `DeviceHub`); the coordinator knows nothing of sockets.
    public typealias Pinging = @Sendable (_ ping: LocateMessage, _ owner: UUID) async -> Void

    /// Keeps `fix` for request `id` while a phone's answer on this instance is settled;
    /// false when the request does not wait here (then the fix must travel sealed).
    func settlingHere(_ id: UUID, fix: LocationFix) -> Bool {
        guard let waiter = waiters[id], waiter.answer == nil, !waiter.resumable else { return false }
        waiters[id]?.settlingFix = fix
        return true
    }

    /// The settle of a fix kept by `settlingHere` did not win (another answer did).
    func settledElsewhere(_ id: UUID) {
        waiters[id]?.settlingFix = nil
    }

    /// Requests waiting here now (for /metrics, resync and drain).
    public var waitingCount: Int { waiters.count }

    /// An answer for this instance: its notification, or settled here (then with the fix
    /// it sealed, which saves opening it again).
    public func deliver(_ answer: AnswerNotification) {
        deliver(answer, fix: nil)
    }

    func deliver(_ answer: AnswerNotification, fix: LocationFix?) {
        guard answer.waiter == instance else { return }
        wakeWatchers(of: answer.id)
        guard var waiter = waiters[answer.id], waiter.answer == nil else {
            // A durable request opened here: its pushes stop (the answer is kept in Postgres).
            if let pushes { Task { await pushes.settled(answer.id) } }
            return
        }
        waiter.answer = answer
        waiter.fix = fix
        let continuation = waiter.continuation
        waiter.continuation = nil
        waiters[answer.id] = waiter
        continuation?.resume(returning: answer)
    }

    /// Asks the owner's phones and waits for the first answer.
    /// - Parameter pinging: where the request's ping goes for the owner's phones connected here.
    /// - Throws: database errors while opening (the caller answers 503).
    public func locate(_ request: Request, pinging: Pinging = { _, _ in }) async throws -> LocateOutcome {
        let id = request.resumable?.token.id ?? UUID()
        let replyKey = try request.resumable?.token.replyKey() ?? ReplyKey()
        let expiresAt = Date().addingTimeInterval(TimeInterval(request.timeout.components.seconds))
        let waiter = Waiter(request: request, replyKey: replyKey.publicKey, expiresAt: expiresAt)
        if let resumable = request.resumable, resumable.callBound == nil {
            // A task or an async HTTP request: opened, and nobody waits here.
            return try await openHere(id, waiter, durable: true, pinging: pinging) ?? .waiting(expiresAt: expiresAt)
        }
        waiters[id] = waiter
        defer { waiters[id] = nil }
        if let refused = try await openHere(id, waiter, durable: false, pinging: pinging) { return refused }

        let deadline = ContinuousClock.now + request.timeout + grace
        var answer: AnswerNotification?
        var settledAtBound = false
        if let bound = request.resumable?.callBound, bound < request.timeout + grace {
            answer = await waitForAnswer(id, until: .now + bound)
            if answer == nil, !Task.isCancelled {
                // The call's wait bound: the request outlives the call from now on, and the
                // agent comes back with its token (unless it was settled meanwhile: then its
                // answer is on its way, and `finish` below says how it ended).
                if try await database.makeDurable(id: id, instance: instance) == .durable {
                    return .waiting(expiresAt: expiresAt)
                }
                answer = await waitForAnswer(id, until: .now + .seconds(1))
                settledAtBound = true
            }
        }
        if answer == nil, !settledAtBound, !Task.isCancelled { answer = await waitForAnswer(id, until: deadline) }
        await pushes?.settled(id)
        if Task.isCancelled {
            // In a task of its own: this one is cancelled, and the abandon must still go out.
            let database = self.database, instance = self.instance, logger = self.logger
            await Task {
                do { _ = try await database.finish(id: id, instance: instance, abandoned: true) } catch {
                    logger.failure("abandon_failed", error, ["request": id.uuidString])
                }
            }.value
            return .abandoned
        }
        if let answer { return outcome(of: answer, replyKey: replyKey, request: request, fix: waiters[id]?.fix) }

        let finished: RelayDatabase.Finished
        do {
            finished = try await database.finish(id: id, instance: instance, abandoned: false)
        } catch {
            // The database is unreachable at the deadline: the deadline still holds.
            logger.failure("finish_failed", error, ["request": id.uuidString])
            return .failure(.phoneSilent)
        }
        if finished.status == .alreadySettled {
            if finished.outcome == .expired || finished.outcome == .abandoned {
                // Reaped while this instance could not beat (a long database outage).
                return finished.delivered == true ? .failure(.phoneSilent) : .failure(.notConnected(email: request.email))
            }
            // An answer won at the last moment; its notification is on its way.
            if let late = await waitForAnswer(id, until: .now + .seconds(1)) {
                return outcome(of: late, replyKey: replyKey, request: request)
            }
            if finished.outcome == .location {
                // A sealed fix whose notification this instance missed (its LISTEN connection
                // was replaced, or the settle ran late on a server that had hung): ask its
                // sealer to send it again, and never report a fix the phone sent as "no fix".
                _ = try? await database.requestReplay([id], instance: instance)
                if let replayed = await waitForAnswer(id, until: .now + Self.lateReplayWait) {
                    return outcome(of: replayed, replyKey: replyKey, request: request)
                }
                return .failure(.phoneSilent)
            }
            return outcome(of: AnswerNotification(id: id, waiter: instance, outcome: finished.outcome ?? .unavailable,
                                                  reason: finished.reason ?? "error", sealed: nil),
                           replyKey: replyKey, request: request)
        }
        return finished.delivered == true ? .failure(.phoneSilent) : .failure(.notConnected(email: request.email))
    }

    /// Re-reads the rows of every request still waiting here (after a LISTEN reconnect, and
    /// as a slow backstop poll): answers whose notification was lost are delivered (a
    /// sealed fix is asked for again from the instance that sealed it), requests reaped
    /// meanwhile wake their waiters, and rows lost in a Postgres crash are re-created (and
    /// their pings go through `pinging`).
    /// - Returns: how many rows were re-created.
    @discardableResult
    public func resync(pinging: Pinging = { _, _ in }) async throws -> Int {
        let ids = waiters.filter { $0.value.answer == nil }.map(\.key)
        guard !ids.isEmpty else { return 0 }
        var states: [RelayDatabase.RequestState] = []
        for batch in ids.chunks(of: RelayDatabase.maxRequestStates) { states += try await database.requestStates(batch) }
        var replay: [UUID] = []
        for state in states where state.settled {
            switch state.outcome {
            case .location? where waiters[state.id]?.settlingFix != nil:
                // Settled here in process; the settle's own result never came back.
                deliver(AnswerNotification(id: state.id, waiter: instance, outcome: .location, reason: nil, sealed: nil),
                        fix: waiters[state.id]?.settlingFix)
            case .location?:
                replay.append(state.id)
            case .denied?, .unavailable?:
                deliver(AnswerNotification(id: state.id, waiter: instance, outcome: state.outcome!, reason: state.reason, sealed: nil))
            case .expired?, .abandoned?, nil:
                expire(state.id)  // expired or abandoned by a reaper: finish reports it
            }
        }
        for batch in replay.chunks(of: RelayDatabase.maxReplays) { try await database.requestReplay(batch, instance: instance) }
        let present = Set(states.map(\.id))
        var recreated = 0
        for id in ids where !present.contains(id) {
            guard let waiter = waiters[id], waiter.answer == nil, waiter.expiresAt > Date() else { continue }
            let opened = try await open(id, waiter)
            guard opened.status == .opened else { continue }
            recreated += 1
            if let ping = opened.ping { await pinging(ping, waiter.request.owner) }
        }
        return recreated
    }

    /// Opens the request, pings the owner's phones here and starts its pushes; the outcome
    /// when it was refused.
    private func openHere(_ id: UUID, _ waiter: Waiter, durable: Bool, pinging: Pinging) async throws -> LocateOutcome? {
        let opened = try await open(id, waiter, durable: durable)
        if opened.status == .tooMany || opened.status == .full { return .failure(.tooManyWaiting) }
        if let ping = opened.ping { await pinging(ping, waiter.request.owner) }
        await pushes?.opened(id, connections: opened.connections ?? 0, expires: waiter.expiresAt)
        return nil
    }

    /// Inserts the request's row (notifying the other instances that hold the owner's
    /// phones); `exists` when it is there already.
    private func open(_ id: UUID, _ waiter: Waiter, durable: Bool = false) async throws -> RelayDatabase.Opened {
        if let resumable = waiter.request.resumable {
            let latest = waiter.expiresAt.addingTimeInterval(600)
            let keepUntil = resumable.ttl.map { ttl in
                min(latest, max(waiter.expiresAt, Date().addingTimeInterval(Double(ttl.components.seconds))))
            } ?? latest
            return try await database.openDurableRequest(
                id: id, owner: waiter.request.owner, requester: waiter.request.requester, binding: resumable.binding,
                clientName: waiter.request.clientName, instance: instance, replyKey: waiter.replyKey,
                expiresAt: waiter.expiresAt, keepUntil: keepUntil, durable: durable, wrappedSecret: resumable.wrapped,
                maxWaiting: resumable.callBound == nil ? Self.maxWaitingDurable : maxWaiting)
        }
        return try await database.openRequest(
            id: id, owner: waiter.request.owner, requester: waiter.request.requester, clientID: waiter.request.clientID,
            clientName: waiter.request.clientName, instance: instance, replyKey: waiter.replyKey,
            expiresAt: waiter.expiresAt, maxWaiting: maxWaiting)
    }

    /// Suspends until the answer for `id` arrives, `deadline` passes, or the task is cancelled.
    private func waitForAnswer(_ id: UUID, until deadline: ContinuousClock.Instant) async -> AnswerNotification? {
        if let answer = waiters[id]?.answer { return answer }
        let timer = timers.after(deadline - .now) { [weak self] in await self?.expire(id) }
        defer { timer.cancel() }
        return await withTaskCancellationHandler {
            await withCheckedContinuation { continuation in
                if let answer = waiters[id]?.answer {
                    continuation.resume(returning: answer)
                } else if Task.isCancelled || waiters[id] == nil {
                    continuation.resume(returning: nil)
                } else {
                    waiters[id]?.continuation = continuation
                }
            }
        } onCancel: {
            Task { await self.expire(id) }
        }
    }

    /// How long a waiter whose request was settled with a fix it never received waits for
    /// the sealer's replay at its deadline.
    static let lateReplayWait: Duration = .seconds(3)

    /// Wakes the waiter of `id` without an answer (deadline, cancellation, or reaped).
    private func expire(_ id: UUID) {
        guard let continuation = waiters[id]?.continuation else { return }
        waiters[id]?.continuation = nil
        continuation.resume(returning: nil)
    }

    func outcome(of answer: AnswerNotification, replyKey: ReplyKey, request: Request,
                         fix local: LocationFix? = nil) -> LocateOutcome {
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
