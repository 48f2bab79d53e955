import Foundation
@testable import RelayCore
import Testing

/// PushPlan: every transition (docs/protocol.md, "When pushes go out" and "Who sends: the
/// claim"), with no I/O and a hand-set clock.
@Suite struct PushPlanTests {
    let t0 = Date(timeIntervalSince1970: 1_796_000_000)
    /// The wake and checking stages alone; the re-alert has its own tests (`realertTiming`).
    let timing = PushTiming(realertDelay: nil)
    let realertTiming = PushTiming()

    private func plan(expiresIn seconds: TimeInterval = 60) -> PushPlan {
        PushPlan(expires: t0.addingTimeInterval(seconds), timing: timing)
    }

    /// No device connected: the wake is armed for t0; with one, for t0 + 2 s.
    @Test func wakeTimeFollowsConnections() {
        var none = plan()
        #expect(none.handle(.opened(connections: 0, now: t0)) == [.arm(.wake, at: t0)])
        var some = plan()
        #expect(some.handle(.opened(connections: 2, now: t0)) == [.arm(.wake, at: t0.addingTimeInterval(2))])
    }

    /// An alert wake: claim, send, done.
    @Test func alertWake() {
        var plan = plan()
        _ = plan.handle(.opened(connections: 1, now: t0))
        #expect(plan.handle(.timerFired(.wake, now: t0 + 2)) == [.claim(.wake)])
        #expect(plan.handle(.claimResult(.wake, .claimed(.alert), now: t0 + 2)) == [.send(.alert), .done])
        #expect(plan.isFinished)
        #expect(plan.handle(.timerFired(.checking, now: t0 + 10)) == [])
    }

    /// A silent wake arms the checking alert 8 s later; its claim sends it.
    @Test func silentWakeThenChecking() {
        var plan = plan()
        _ = plan.handle(.opened(connections: 0, now: t0))
        _ = plan.handle(.timerFired(.wake, now: t0))
        #expect(plan.handle(.claimResult(.wake, .claimed(.silent), now: t0)) == [.send(.silent), .arm(.checking, at: t0 + 8)])
        #expect(plan.handle(.timerFired(.checking, now: t0 + 8)) == [.claim(.checking)])
        #expect(plan.handle(.claimResult(.checking, .claimed(.checking), now: t0 + 8)) == [.send(.checking), .done])
        #expect(plan.wakeSent == .silent && plan.checkingSent)
    }

    /// Always allowed without an APNs token: the checking Web Push is the wake; nothing follows.
    @Test func checkingAsWake() {
        var plan = plan()
        _ = plan.handle(.opened(connections: 0, now: t0))
        _ = plan.handle(.timerFired(.wake, now: t0))
        #expect(plan.handle(.claimResult(.wake, .claimed(.checking), now: t0)) == [.send(.checking), .done])
    }

    /// An answer before a timer ends the plan; the timer then does nothing. An answer after
    /// the silent wake cancels the checking stage.
    @Test func answerBeforeAndBetweenStages() {
        var before = plan()
        _ = before.handle(.opened(connections: 1, now: t0))
        #expect(before.handle(.answered) == [.done])
        #expect(before.handle(.timerFired(.wake, now: t0 + 2)) == [])
        var between = plan()
        _ = between.handle(.opened(connections: 0, now: t0))
        _ = between.handle(.timerFired(.wake, now: t0))
        _ = between.handle(.claimResult(.wake, .claimed(.silent), now: t0))
        #expect(between.handle(.answered) == [.done])
        #expect(between.handle(.timerFired(.checking, now: t0 + 8)) == [])
        #expect(between.handle(.answered) == [])
    }

    /// Less than 3 s left at a stage's time: skipped for good.
    @Test func minimumLeft() {
        var short = plan(expiresIn: 4)
        _ = short.handle(.opened(connections: 1, now: t0))
        #expect(short.handle(.timerFired(.wake, now: t0 + 2)) == [.done])
        var checking = plan(expiresIn: 10)
        _ = checking.handle(.opened(connections: 0, now: t0))
        _ = checking.handle(.timerFired(.wake, now: t0))
        _ = checking.handle(.claimResult(.wake, .claimed(.silent), now: t0))
        #expect(checking.handle(.timerFired(.checking, now: t0 + 8)) == [.done])
    }

    /// Every refusal (settled, expired, gone, already) ends the plan without a send.
    @Test func refusalsEndThePlan() {
        for status in [RelayStatus.Claim.settled, .expired, .already, .notApplicable] {
            var plan = plan()
            _ = plan.handle(.opened(connections: 0, now: t0))
            _ = plan.handle(.timerFired(.wake, now: t0))
            #expect(plan.handle(.claimResult(.wake, .refused(status), now: t0)) == [.done], "\(status)")
        }
    }

    /// No row while the waiter still waits (lost in a crash, not yet re-created): asked again.
    @Test func goneIsRetriedUntilTheRowIsBack() {
        var plan = plan()
        _ = plan.handle(.opened(connections: 0, now: t0))
        _ = plan.handle(.timerFired(.wake, now: t0))
        #expect(plan.handle(.claimResult(.wake, .refused(.gone), now: t0)) == [.arm(.wake, at: t0 + 1)])
        #expect(plan.handle(.timerFired(.wake, now: t0 + 1)) == [.claim(.wake)])
        #expect(plan.handle(.claimResult(.wake, .claimed(.alert), now: t0 + 1)) == [.send(.alert), .done])
    }

    /// A claim the database could not take is tried again a second later, while time allows.
    @Test func failedClaimIsRetried() {
        var plan = plan(expiresIn: 5)
        _ = plan.handle(.opened(connections: 0, now: t0))
        _ = plan.handle(.timerFired(.wake, now: t0))
        #expect(plan.handle(.claimResult(.wake, .failed, now: t0)) == [.arm(.wake, at: t0 + 1)])
        #expect(plan.handle(.timerFired(.wake, now: t0 + 1)) == [.claim(.wake)])
        #expect(plan.handle(.claimResult(.wake, .failed, now: t0 + 1.5)) == [.done], "no retry with < 3 s left after it")
    }

    /// After a Postgres crash the re-created row has no claims: the checking claim answers
    /// not_applicable; the plan restores the wake claim without sending it again, then
    /// claims and sends checking — one silent, one checking push in all.
    @Test func restoresClaimsLostInACrash() {
        var plan = plan()
        _ = plan.handle(.opened(connections: 0, now: t0))
        _ = plan.handle(.timerFired(.wake, now: t0))
        _ = plan.handle(.claimResult(.wake, .claimed(.silent), now: t0))
        _ = plan.handle(.timerFired(.checking, now: t0 + 8))
        #expect(plan.handle(.claimResult(.checking, .failed, now: t0 + 8)) == [.arm(.checking, at: t0 + 9)])
        #expect(plan.handle(.timerFired(.checking, now: t0 + 9)) == [.claim(.checking)])
        #expect(plan.handle(.claimResult(.checking, .refused(.notApplicable), now: t0 + 9)) == [.claim(.wake)])
        #expect(plan.handle(.claimResult(.wake, .claimed(.silent), now: t0 + 9)) == [.claim(.checking)])
        #expect(plan.handle(.claimResult(.checking, .claimed(.checking), now: t0 + 9)) == [.send(.checking), .done])
        // A second loss is not restored again.
        var twice = self.plan()
        _ = twice.handle(.opened(connections: 0, now: t0))
        _ = twice.handle(.timerFired(.wake, now: t0))
        _ = twice.handle(.claimResult(.wake, .claimed(.silent), now: t0))
        _ = twice.handle(.timerFired(.checking, now: t0 + 8))
        _ = twice.handle(.claimResult(.checking, .refused(.notApplicable), now: t0 + 8))
        _ = twice.handle(.claimResult(.wake, .claimed(.silent), now: t0 + 8))
        #expect(twice.handle(.claimResult(.checking, .refused(.notApplicable), now: t0 + 8)) == [.done])
    }

    /// A stale timer or a result for another stage changes nothing.
    @Test func staleEventsAreIgnored() {
        var plan = plan()
        _ = plan.handle(.opened(connections: 1, now: t0))
        #expect(plan.handle(.timerFired(.checking, now: t0 + 2)) == [])
        #expect(plan.handle(.claimResult(.wake, .claimed(.alert), now: t0)) == [])
        #expect(plan.handle(.opened(connections: 0, now: t0)) == [])
    }

    /// The one re-alert (docs/protocol.md, "Re-alert"): an alert still unanswered 30 s after
    /// the request opened is claimed once more while 20 s remain; then the plan is over.
    @Test func anUnansweredAlertIsRealertedOnce() {
        var plan = PushPlan(expires: t0.addingTimeInterval(60), timing: realertTiming)
        _ = plan.handle(.opened(connections: 0, now: t0))
        _ = plan.handle(.timerFired(.wake, now: t0))
        #expect(plan.handle(.claimResult(.wake, .claimed(.alert), now: t0)) == [.send(.alert), .arm(.realert, at: t0 + 30)])
        #expect(plan.handle(.timerFired(.realert, now: t0 + 30)) == [.claim(.realert)])
        #expect(plan.handle(.claimResult(.realert, .claimed(.alert), now: t0 + 30)) == [.send(.alert), .done])
        #expect(plan.realertSent && plan.isFinished)
    }

    /// After a silent wake and its checking alert, the re-alert follows the checking alert.
    @Test func aCheckingAlertIsRealertedToo() {
        var plan = PushPlan(expires: t0.addingTimeInterval(120), timing: realertTiming)
        _ = plan.handle(.opened(connections: 1, now: t0))
        _ = plan.handle(.timerFired(.wake, now: t0 + 2))
        _ = plan.handle(.claimResult(.wake, .claimed(.silent), now: t0 + 2))
        _ = plan.handle(.timerFired(.checking, now: t0 + 10))
        #expect(plan.handle(.claimResult(.checking, .claimed(.checking), now: t0 + 10)) == [.send(.checking), .arm(.realert, at: t0 + 30)])
    }

    /// Too little time left for the re-alert (less than 20 s after it), an answer, or a
    /// refusal (another claim won, or the request settled): no re-alert.
    @Test func noRealertWithoutTimeOrAfterAnAnswer() {
        var short = PushPlan(expires: t0.addingTimeInterval(49), timing: realertTiming)
        _ = short.handle(.opened(connections: 0, now: t0))
        _ = short.handle(.timerFired(.wake, now: t0))
        #expect(short.handle(.claimResult(.wake, .claimed(.alert), now: t0)) == [.send(.alert), .done])
        var answered = PushPlan(expires: t0.addingTimeInterval(60), timing: realertTiming)
        _ = answered.handle(.opened(connections: 0, now: t0))
        _ = answered.handle(.timerFired(.wake, now: t0))
        _ = answered.handle(.claimResult(.wake, .claimed(.alert), now: t0))
        #expect(answered.handle(.answered) == [.done])
        #expect(answered.handle(.timerFired(.realert, now: t0 + 30)) == [])
        var refused = PushPlan(expires: t0.addingTimeInterval(60), timing: realertTiming)
        _ = refused.handle(.opened(connections: 0, now: t0))
        _ = refused.handle(.timerFired(.wake, now: t0))
        _ = refused.handle(.claimResult(.wake, .claimed(.alert), now: t0))
        _ = refused.handle(.timerFired(.realert, now: t0 + 30))
        #expect(refused.handle(.claimResult(.realert, .refused(.already), now: t0 + 30)) == [.done])
        #expect(!refused.realertSent)
    }
}
