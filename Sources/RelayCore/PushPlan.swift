import Foundation

/// When push stages go out (docs/protocol.md, "When pushes go out"); tests shrink them.
public struct PushTiming: Sendable, Equatable {
    /// With a device connected, the wake waits this long for an answer over the socket.
    public var wakeDelay: TimeInterval = 2
    /// After a silent wake, the "checking" alert follows this much later.
    public var checkingDelay: TimeInterval = 8
    /// No stage goes out with less than this left before the request's deadline.
    public var minimumLeft: TimeInterval = 3
    /// A claim that failed (database unreachable) is tried again this much later.
    public var claimRetry: TimeInterval = 1
    /// REALERT_SECONDS: an alert still unanswered this long after the request opened gets
    /// one more (docs/protocol.md, "Re-alert"); nil: none.
    public var realertDelay: TimeInterval? = 30
    /// The re-alert goes out only with at least this much of the request left.
    public var realertMinimumLeft: TimeInterval = 20

    /// The defaults (docs/protocol.md, "When pushes go out" and "Re-alert").
    public init(wakeDelay: TimeInterval = 2, checkingDelay: TimeInterval = 8, minimumLeft: TimeInterval = 3,
                claimRetry: TimeInterval = 1, realertDelay: TimeInterval? = 30) {
        self.wakeDelay = wakeDelay
        self.checkingDelay = checkingDelay
        self.minimumLeft = minimumLeft
        self.claimRetry = claimRetry
        self.realertDelay = realertDelay
    }
}

/// The push stages of one request on its waiting instance, as a state machine: events in,
/// actions out, no I/O (docs/protocol.md, "Who sends: the claim"). The waiter remembers what it claimed, so a row
/// re-created after a Postgres crash (claims lost) never gets a stage twice.
package struct PushPlan: Sendable {
    /// A push stage.
    package enum Stage: String, Sendable { case wake, checking, realert }

    /// What a claimed wake turned out to be.
    package enum Kind: String, Sendable { case alert, silent, checking }

    /// What `relay.claim_push` answered.
    package enum ClaimResult: Sendable, Equatable {
        /// Send this kind now.
        case claimed(Kind)
        /// settled, expired, already or not_applicable: nothing to send (gone: retried,
        /// the waiter re-creates a row lost in a crash).
        case refused(RelayStatus.Claim)
        /// The database could not be asked.
        case failed
    }

    /// What happened.
    package enum Event: Sendable {
        case opened(connections: Int, now: Date)
        case timerFired(Stage, now: Date)
        case claimResult(Stage, ClaimResult, now: Date)
        case answered
    }

    /// What to do.
    package enum Action: Sendable, Equatable {
        /// Fire `timerFired(stage)` at `at`.
        case arm(Stage, at: Date)
        /// Ask `relay.claim_push` for the stage; feed back `claimResult`.
        case claim(Stage)
        /// Push this kind to the claim's targets.
        case send(Kind)
        /// The plan is over; forget it.
        case done
    }

    private enum State: Equatable {
        case new
        case armed(Stage)
        case claiming(Stage)
        case finished
    }

    private let expires: Date
    private let timing: PushTiming
    private var state = State.new
    /// The wake kind claimed and sent (nil: none yet).
    package private(set) var wakeSent: Kind?
    /// Whether the checking alert was claimed and sent.
    package private(set) var checkingSent = false
    /// Whether the re-alert was claimed and sent.
    package private(set) var realertSent = false
    /// When the request opened (the re-alert counts from there).
    private var openedAt: Date?
    /// Whether the wake claim was made again to restore claims a crash erased.
    private var restoring = false
    private var restored = false

    /// A plan for a request whose deadline is `expires`.
    package init(expires: Date, timing: PushTiming) {
        self.expires = expires
        self.timing = timing
    }

    /// Whether the plan is over.
    package var isFinished: Bool { state == .finished }

    /// Feeds one event; returns what to do, in order.
    package mutating func handle(_ event: Event) -> [Action] {
        switch (state, event) {
        case (_, .answered), (.finished, _):
            return finish()
        case (.new, .opened(let connections, let now)):
            openedAt = now
            state = .armed(.wake)
            return [.arm(.wake, at: connections == 0 ? now : now.addingTimeInterval(timing.wakeDelay))]
        case (.armed(let armed), .timerFired(let stage, let now)) where armed == stage:
            guard expires.timeIntervalSince(now) >= timing.minimumLeft else { return finish() }
            state = .claiming(stage)
            return [.claim(stage)]
        case (.claiming(let claiming), .claimResult(let stage, let result, let now)) where claiming == stage:
            return claimed(stage, result, now: now)
        default:
            return []  // a stale timer or result: nothing to do
        }
    }

    private mutating func claimed(_ stage: Stage, _ result: ClaimResult, now: Date) -> [Action] {
        switch (stage, result) {
        case (_, .failed), (_, .refused(.gone)):
            // No answer, or no row while this instance still waits: the row was lost in a
            // Postgres crash and the waiter's resync re-creates it. Ask again shortly.
            let retry = now.addingTimeInterval(timing.claimRetry)
            guard expires.timeIntervalSince(retry) >= timing.minimumLeft else { return finish() }
            state = .armed(stage)
            return [.arm(stage, at: retry)]
        case (.wake, .claimed) where restoring:
            // The re-created row has its wake claim back; now the checking stage can be claimed.
            restoring = false
            state = .claiming(.checking)
            return [.claim(.checking)]
        case (.wake, .claimed(let kind)):
            wakeSent = kind
            guard kind == .silent else { return [.send(kind)] + realertOrFinish() }
            state = .armed(.checking)
            return [.send(kind), .arm(.checking, at: now.addingTimeInterval(timing.checkingDelay))]
        case (.checking, .claimed):
            checkingSent = true
            return [.send(.checking)] + realertOrFinish()
        case (.realert, .claimed):
            realertSent = true
            return [.send(.alert)] + finish()
        case (.checking, .refused(.notApplicable)) where wakeSent == .silent && !restored:
            // The row lost its claims (re-created after a Postgres crash): restore the wake
            // claim without sending it again, then claim checking.
            restoring = true
            restored = true
            state = .claiming(.wake)
            return [.claim(.wake)]
        case (_, .refused):
            return finish()
        }
    }

    /// After an alert: the one re-alert is armed when it can still go out with
    /// `realertMinimumLeft` to spare; else the plan is over.
    private mutating func realertOrFinish() -> [Action] {
        guard let delay = timing.realertDelay, let openedAt else { return finish() }
        let at = openedAt.addingTimeInterval(delay)
        guard expires.timeIntervalSince(at) >= timing.realertMinimumLeft else { return finish() }
        state = .armed(.realert)
        return [.arm(.realert, at: at)]
    }

    private mutating func finish() -> [Action] {
        guard state != .finished else { return [] }
        state = .finished
        return [.done]
    }
}
