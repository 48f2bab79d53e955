import Foundation

/// Every locate call waiting on this instance, as one value driven by events: the call
/// itself, the results of its own database calls (open, make durable, finish), its
/// answer (a notification, or settled here), its timers, the agent hanging up and what a
/// resync read. Each event returns the actions to perform: call the database, ping, start
/// or stop pushes, arm a wait, complete the call.
///
/// A call's life: opening → waiting for its answer (until its call bound, its deadline, a
/// second after a settle at the bound, a last moment after a late settle, or a replay) →
/// making durable or finishing → complete. An answer that arrives while a database call
/// runs is kept and taken by the next wait. No I/O and no clock of its own (`now` comes
/// with each event): `InstanceDriver` performs the actions, and the tests drive the
/// value with instants of their own.
package struct WaiterState {
    /// What the value needs of a call's request (the rest — its token and binding, the
    /// agent's names, its reason — stays with the driver, which opens the request).
    package struct Request: Sendable {
        /// Whose phones are asked.
        package let owner: UUID
        /// The credential's email, for the 503 text.
        package let email: String?
        /// How long the phone has to answer.
        package let timeout: Duration
        /// How long the call waits before the request outlives it, when it may.
        package let callBound: Duration?
        /// Whether its result is kept for the agent's token (its fix always comes sealed:
        /// the agent may fetch it elsewhere).
        package let resumable: Bool

        /// What the value needs of a call.
        package init(owner: UUID, email: String?, timeout: Duration, callBound: Duration? = nil, resumable: Bool = false) {
            self.owner = owner
            self.email = email
            self.timeout = timeout
            self.callBound = callBound
            self.resumable = resumable
        }
    }

    /// One waiting call.
    package struct Waiter: Sendable {
        /// What the agent asked.
        package let request: Request
        /// The reply key's public half (the ping carries it).
        package let publicKey: [UInt8]
        /// When the phone's answer is due.
        package let expiresAt: Date
        /// When the call began (its deadline is timeout + grace from then).
        package let calledAt: ContinuousClock.Instant
        var phase = Phase.opening
        var answer: AnswerNotification?
        /// The fix itself when the phone answered on this instance (no need to open it).
        var fix: LocationFix?
        /// A fix answered here and being settled (not sealed: it never crosses Postgres);
        /// a resync delivers it when the settle committed but its result was lost.
        var settlingFix: LocationFix?
        /// The request was withdrawn (an explicit cancel, or its credential revoked): it is
        /// abandoned at the next step.
        package var withdrawn = false
        /// The call went away (the client's timeout, a closed stream, a dropped connection):
        /// a hang-up is not a refusal, and the person keeps the prompt until the deadline —
        /// a resumable request outlives the call as a durable one does, another keeps
        /// waiting here for the calls that join it.
        package var callerGone = false

        /// A resumable request's fix always comes sealed (the agent may fetch it elsewhere).
        var resumable: Bool { request.resumable }

        /// Whether its request is still being opened (its row not committed yet).
        package var isOpening: Bool { phase == .opening }

        /// A call of `request`, its reply key's public half, when its phone's answer is due
        /// and when it began.
        package init(request: Request, publicKey: [UInt8], expiresAt: Date, calledAt: ContinuousClock.Instant) {
            self.request = request
            self.publicKey = publicKey
            self.expiresAt = expiresAt
            self.calledAt = calledAt
        }
    }

    /// Where a call is.
    package enum Phase: Equatable, Sendable {
        case opening
        case waiting(Wait)
        case makingDurable
        case finishing(abandoned: Bool)
    }

    /// What a call waits for its answer until.
    package enum Wait: Equatable, Sendable {
        /// The call's wait bound: then the request outlives the call.
        case bound
        /// The phone's deadline plus the grace.
        case deadline
        /// A second after the request settled at the bound (its answer is on its way).
        case settledAtBound
        /// A second after `finish` found it settled (its answer is on its way).
        case lastMoment(RelayRows.Finished)
        /// The sealer's replay of a fix this instance never received.
        case replay

        /// Whether it is the call's main wait (leaving it stops the pushes).
        var isMain: Bool {
            switch self {
            case .bound, .deadline, .settledAtBound: true
            case .lastMoment, .replay: false
            }
        }
    }

    /// How a call ends.
    package enum Completion: Sendable {
        /// With this answer (the executor opens a sealed fix with the call's key).
        case answered(AnswerNotification, fix: LocationFix?)
        case outcome(LocateOutcome)
        case failed(any Error)
    }

    /// What happened.
    package enum Event: Sendable {
        /// A call waits for request `id`: open it.
        case called(UUID, Waiter)
        /// The open came back.
        case opened(UUID, Result<RelayRows.Opened, any Error>)
        /// An answer for a request waiting here (its notification, or settled here).
        case answer(AnswerNotification, fix: LocationFix?)
        /// A wait's timer fired.
        case timerFired(UUID, Wait)
        /// The current wait ends now (a resync found the request reaped).
        case expire(UUID)
        /// The call went away before its answer (not a refusal: the request stays open for
        /// the person until its deadline).
        case hungUp(UUID)
        /// The request is withdrawn (an explicit cancel, a revoked credential): abandoned.
        case withdrawn(UUID)
        /// `make_durable` came back.
        case madeDurable(UUID, Result<RelayStatus.MakeDurable, any Error>)
        /// `finish` came back.
        case finished(UUID, Result<RelayRows.Finished, any Error>)
        /// A resync read these rows of the requests it asked for (`asked`); rows missing
        /// were lost in a Postgres crash.
        case states([RelayRows.RequestState], asked: [UUID])
        /// The open of a row lost in a crash (`open(_, again: true)`) came back.
        case reopened(UUID, Result<RelayRows.Opened, any Error>)
        /// The instance stops (its drain is over): every call still here ends at once with
        /// `error` — a caller who left (a hang-up keeps its call for the calls that join it)
        /// or one past the drain's deadline. Their requests are left to the database, which
        /// abandons a stopped instance's requests when it reaps it.
        case stopping(any Error)
        /// A phone on this instance answered request `id` with `fix`, and the settle is about
        /// to run: a call waiting here for it keeps the fix (`keptHere`), which then never
        /// needs sealing (it does not cross Postgres); otherwise nothing happens and the fix
        /// must travel sealed.
        case settling(UUID, LocationFix)
        /// The settle of a kept fix did not win (another answer did): the fix is dropped.
        case settledElsewhere(UUID)
    }

    /// What to do.
    package enum Action {
        /// Open request `id` (first, or again after a crash with `again`); its waiter is
        /// `waiters[id]` (actions stay small: they are built and queued per event). Then
        /// report `opened` (or `reopened`).
        case open(UUID, again: Bool)
        /// A row lost in a crash was re-created (the resync counts them).
        case recreated(UUID)
        /// Re-creating it failed (the resync reports it; the next one tries again).
        case reopenFailed(UUID, any Error)
        /// Ping the owner's phones connected here.
        case ping(UUID, LocateMessage, owner: UUID)
        /// Start the request's pushes.
        case pushesOpened(UUID, connections: Int, expires: Date)
        /// Stop them.
        case pushesSettled(UUID)
        /// Report `timerFired(id, wait)` after `delay` (replacing the call's timer).
        case arm(UUID, Wait, after: Duration)
        /// Stop the call's timer.
        case cancelTimer(UUID)
        /// Call `make_durable`, then report `madeDurable`.
        case makeDurable(UUID)
        /// Call `finish`, then report `finished`.
        case finish(UUID, abandoned: Bool)
        /// Ask the sealers of these fixes to send them again.
        case requestReplay([UUID])
        /// Wake the polls of `id` waiting on this instance.
        case wakePolls(UUID)
        /// The call ends (its waiter is forgotten; boxed, so that every action stays small).
        indirect case complete(UUID, Completion)
        /// An event that cannot happen in the waiter's phase (a database result for a call
        /// not waiting for it): nothing changes, and the driver logs and counts it
        /// (`waiter_event_unexpected`) instead of it being dropped silently. A timer or a
        /// hang-up after the call ended is not one of these: those races are expected.
        case unexpected(UUID, event: String)
        /// The call waiting here keeps the fix of `settling`: settle it as `local_location`,
        /// unsealed (a decision for the settle under way rather than work to do).
        case keptHere(UUID)
    }

    /// The grace after `expires_ms` during which the phone's own answer is still awaited.
    let grace: Duration
    /// The calls by request (internal only so that the transitions can live in their own file).
    package internal(set) var waiters: [UUID: Waiter] = [:]

    /// How long a call waits after a settle at its bound, and after `finish` found a late settle.
    static let lateAnswerWait: Duration = .seconds(1)
    /// How long it waits for the sealer's replay of a fix it never received.
    static let lateReplayWait: Duration = .seconds(3)

    package init(grace: Duration) {
        self.grace = grace
    }

    /// Calls waiting here.
    package var count: Int { waiters.count }

    /// Calls whose caller still waits (a drain waits for these; a hung-up synchronous call
    /// waits for its deadline only for the calls that might join it, and a draining
    /// instance takes no new call).
    package var attended: Int { waiters.values.reduce(0) { $0 + ($1.callerGone ? 0 : 1) } }

    /// The requests whose answer has not arrived (a resync reads their rows).
    package var unanswered: [UUID] { waiters.filter { $0.value.answer == nil }.map(\.key) }
}
