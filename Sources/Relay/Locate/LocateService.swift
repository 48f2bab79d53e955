import Foundation
import RelayCore

/// One locate as both transports (HTTP and MCP) ask it: resolve `person` for shared
/// locations, ask the phones, and phrase the result.
struct LocateService: Sendable {
    /// The instance: it opens the request, pings the phones here and waits for the answer.
    let driver: InstanceDriver
    let database: RelayDatabase
    let metrics: LocateMetrics
    let clientNames: ClientNames
    /// The instance's clock: a locate's duration, the joins' times, a fix's age.
    let clock: RelayClock
    /// The instances' key for wrapping task secrets (tasks/list), when configured.
    var requestIDKey: [UInt8]? = nil
    /// The requests a repeated ask of the same credential and person joins.
    let joins = JoinableRequests()

    /// How long a locate may outlive its call.
    enum Mode: Sendable, Equatable {
        /// It waits in the call and ends with it (POST /v1/locate).
        case synchronous
        /// It waits in the call at most `bound`, then outlives it (get_phone_location).
        case call(bound: Duration)
        /// It outlives the call from the start (MCP tasks, `Prefer: respond-async`); `ttl`
        /// is the task's retention, `listed` whether tasks/list may name it.
        case durable(ttl: Duration?, listed: Bool)
    }

    /// What the agent gets: the fix JSON (200), or a failure with its status and text.
    enum Result: Sendable, Equatable {
        case fix(json: String, structured: String)
        case failure(AgentFailure)
        case abandoned
        /// Still open after the call's bound (or at once, for a durable request): come
        /// back with the token. `joined`: the call joined a request the same agent had
        /// already opened for the same person (no second prompt).
        case waiting(RequestToken, expiresAt: Date, person: Person?, joined: Bool = false)

        /// Whether the request is still open (the agent comes back for it).
        var isWaiting: Bool {
            if case .waiting = self { true } else { false }
        }

        /// The outcome label for /metrics (a fixed word).
        var metricName: String {
            switch self {
            case .fix: "location"
            case .abandoned: "abandoned"
            case .waiting: "waiting"
            case .failure(let failure):
                switch failure {
                case .badCredential: "unauthorized"
                case .declined, .personDeclined: "declined"
                case .noAnswer: "no_answer"
                case .permissionOff: "permission"
                case .noFix: "no_fix"
                case .tooManyWaiting: "too_many"
                case .notConnected: "offline"
                case .phoneSilent: "timeout"
                case .nobodyNamed, .ambiguousPerson: "unknown_person"
                case .quietHours: "quiet_hours"
                }
            }
        }
    }

    /// Locates the agent's own user, or `person` when someone who shares with them.
    /// - Throws: database errors (503 for the caller).
    /// - Parameter reason: the agent's reason, cleaned and checked (`LocateReason`).
    /// - Parameter announce: told the request's token as soon as it is known (opened, or
    ///   joined), so that an explicit cancel can find it while the call runs.
    func locate(agent: AgentIdentity, person: String?, reason: String? = nil, timeoutSeconds: Int,
                mode: Mode = .synchronous, announce: @Sendable (RequestToken) -> Void = { _ in }) async throws -> Result {
        let started = clock.instant
        let result = try await locateOnce(agent: agent, person: person, reason: reason, timeoutSeconds: timeoutSeconds, mode: mode,
                                          announce: announce)
        if case .waiting = result { return result }
        metrics.record(outcome: result.metricName, seconds: (clock.instant - started).seconds)
        return result
    }

    /// What a durable request's poll found.
    enum Resumed: Sendable, Equatable {
        /// Unknown to this credential.
        case unknown
        /// Still open (`person`: whose phone, on shared requests).
        case waiting(RelayDatabase.DurableState, person: Person?)
        /// Ended, with the result a first call would have returned.
        case settled(RelayDatabase.DurableState, Result)
    }

    /// Waits up to `wait` for request `token` of `agent` and phrases its outcome.
    /// - Parameter namingWhileWaiting: whether a still-open request's result names whose
    ///   phone was asked (the tool's waiting text; a poll's status needs no name, and no query).
    /// - Throws: database errors (503 for the caller).
    func resume(agent: AgentIdentity, token: RequestToken, wait: Duration, namingWhileWaiting: Bool = false) async throws -> Resumed {
        switch try await driver.poll(token, binding: .init(agent), wait: wait, email: agent.email) {
        case .unknown: return .unknown
        case .waiting(let state):
            return .waiting(state, person: namingWhileWaiting ? try await person(owning: state, agent: agent) : nil)
        case .settled(let state, let outcome):
            // Its outcome reaches a call (the next ask is a new one), unless that call's
            // caller already left.
            joins.handedOver(token, now: clock.date, hungUp: Task.isCancelled)
            // A request made through a share is bound to it: once the share has ended
            // nothing of the owner's reaches the viewer (never a fix without `person`, which
            // the agent would read as its own user's location).
            guard state.owner == agent.userID else {
                guard let shared = try await person(owning: state, agent: agent) else { return .unknown }
                return .settled(state, phrase(outcome, token: token, shared: shared))
            }
            return .settled(state, phrase(outcome, token: token, shared: nil))
        }
    }

    /// Withdraws request `token` of `agent` (an explicit cancel): a call waiting for it here
    /// ends as abandoned, and a request that outlives its call is cancelled in the database;
    /// either way its phones get `cancel`.
    func withdraw(_ token: RequestToken, agent: AgentIdentity) async throws {
        guard await !driver.withdraw(token.id) else { return }
        _ = try await driver.cancel(token, binding: .init(agent), forget: false)
    }

    /// Cancels request `token` of `agent`.
    func cancel(agent: AgentIdentity, token: RequestToken, forget: Bool) async throws -> RelayStatus.CancelDurable {
        try await driver.cancel(token, binding: .init(agent), forget: forget)
    }

    /// Whose phone a shared request asked (nil for the agent's own user).
    private func person(owning state: RelayDatabase.DurableState, agent: AgentIdentity) async throws -> Person? {
        guard state.owner != agent.userID else { return nil }
        return try await database.peopleSharing(with: agent.userID).first { $0.userID == state.owner }
    }

    private func locateOnce(agent: AgentIdentity, person: String?, reason: String?, timeoutSeconds: Int,
                            mode: Mode, announce: @Sendable (RequestToken) -> Void) async throws -> Result {
        var owner = agent.userID
        var requester: UUID?
        var shared: Person?
        if let person = person?.trimmingCharacters(in: .whitespaces), !person.isEmpty {
            let matches = try await database.resolvePerson(viewer: agent.userID, person: String(person.prefix(320)))
            guard let match = matches.first else { return .failure(.nobodyNamed(person)) }
            guard matches.count == 1 else { return .failure(.ambiguousPerson(person, matches)) }
            guard let id = match.userID else { return .failure(.nobodyNamed(person)) }
            owner = id
            requester = agent.userID
            shared = match
        }
        let joinKey = JoinableRequests.Key(user: agent.userID, clientID: agent.clientID, keyID: agent.keyID, owner: owner)
        if case .call(let bound) = mode, let token = try await joinable(joinKey, agent: agent) {
            announce(token)
            if let joined = try await join(token, key: joinKey, agent: agent, wait: bound) { return joined }
        }
        var synchronous: SyncOutcome?
        if case .synchronous = mode {
            if let open = joins.outcome(for: joinKey, now: clock.date) {
                // The same credential's synchronous request for this person waits (its caller
                // may have hung up): this call waits for that outcome, and nobody is asked twice.
                guard let result = await open.outcome() else { throw JoinEnded() }
                joins.forget(open, for: joinKey)
                return result
            }
            synchronous = SyncOutcome()
            joins.remember(synchronous!, for: joinKey, now: clock.date)
        }
        let clientName: String? = if let keyName = agent.keyName { keyName } else { await clientNames.name(of: agent.clientID) }
        var resumable: LocateRequest.Resumable?
        switch mode {
        case .synchronous: break
        case .call(let bound):
            let token = try RequestToken()
            // Wrapped under the instances' key, so that a repeated ask landing on another
            // instance can join it (relay.joinable_request).
            resumable = .init(token: token, binding: .init(agent), callBound: bound,
                              wrapped: try requestIDKey.map { try token.wrapped(under: $0) })
            // Kept as long as its result may be (the deadline plus 10 minutes: docs/agents.md, "Timeouts").
            let now = clock.date
            joins.remember(token, for: joinKey, until: now.addingTimeInterval(Double(timeoutSeconds + 600)), now: now)
            announce(token)
        case .durable(let ttl, let listed):
            let token = try RequestToken()
            resumable = .init(token: token, binding: .init(agent), callBound: nil, ttl: ttl,
                              wrapped: listed ? try requestIDKey.map { try token.wrapped(under: $0) } : nil)
        }
        let outcome: LocateOutcome
        do {
            outcome = try await driver.locate(.init(owner: owner, requester: requester, clientID: agent.clientID,
                                                    clientName: clientName, email: shared == nil ? agent.email : shared?.email,
                                                    timeout: .seconds(timeoutSeconds), resumable: resumable,
                                                    reason: reason, agentKey: agent.keyID))
        } catch {
            if let synchronous {
                synchronous.fail(now: clock.date)
                joins.forget(synchronous, for: joinKey)
            }
            throw error
        }
        let result = phrase(outcome, token: resumable?.token, shared: shared)
        if let token = resumable?.token {
            // Its outcome reached its call, unless the caller left (then the next ask gets it).
            if !result.isWaiting {
                joins.handedOver(token, now: clock.date, hungUp: Task.isCancelled)
            } else if Task.isCancelled {
                joins.hungUp(token)
            }
        }
        if let synchronous {
            // Handed to the calls that joined it; kept a while for the next ask when its own
            // caller hung up and nobody received it.
            if synchronous.publish(result, now: clock.date) || !Task.isCancelled { joins.forget(synchronous, for: joinKey) }
        }
        return result
    }

    /// A joined synchronous request ended without an outcome for this call (it could not be
    /// asked, or this call's own caller left): answered as a database failure.
    struct JoinEnded: Error {}

    /// The request a repeated ask of `key` joins: the one this instance remembers, else (with
    /// a REQUEST_ID_KEY) the credential's request for the person still waiting in the
    /// database, whichever instance opened it.
    private func joinable(_ key: JoinableRequests.Key, agent: AgentIdentity) async throws -> RequestToken? {
        if let token = joins.token(for: key, now: clock.date) { return token }
        guard let requestIDKey, let found = try await database.joinableRequest(binding: .init(agent), owner: key.owner) else {
            return nil
        }
        return RequestToken.unwrap(found.wrapped, under: requestIDKey, id: found.id)
    }

    /// A call that joins `token`, the request its agent already opened for the same person:
    /// it waits up to `wait` for that request's outcome, as a call with its request_id
    /// would. Nil when the request is unknown by now (ended past its TTL, or cancelled): the
    /// call opens a new one.
    private func join(_ token: RequestToken, key: JoinableRequests.Key, agent: AgentIdentity, wait: Duration) async throws
        -> Result? {
        switch try await resume(agent: agent, token: token, wait: wait, namingWhileWaiting: true) {
        case .unknown:
            joins.forget(token, for: key)
            return nil
        case .waiting(let state, let person):
            if Task.isCancelled { joins.hungUp(token) }
            return .waiting(token, expiresAt: state.expiresAt, person: person, joined: true)
        case .settled(_, .abandoned):
            joins.forget(token, for: key)  // withdrawn: the call opens a new one
            return nil
        case .settled(_, let result):
            return result  // handed over by `resume`
        }
    }

    /// The agent's result of an outcome (a fix's JSON names the person on shared requests).
    private func phrase(_ outcome: LocateOutcome, token: RequestToken?, shared: Person?) -> Result {
        switch outcome {
        case .waiting(let expiresAt):
            guard let token else { return .failure(.noFix) }
            return .waiting(token, expiresAt: expiresAt, person: shared, joined: false)
        case .fix(let fix):
            let json = fix.agentJSON(now: clock.date, person: shared)
            return .fix(json: json, structured: json)
        case .failure(.declined) where shared != nil:
            return .failure(.personDeclined(shared!.name))
        case .failure(let failure):
            return .failure(failure)
        case .abandoned:
            return .abandoned
        }
    }
}
