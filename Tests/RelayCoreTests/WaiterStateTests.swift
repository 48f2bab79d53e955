import Foundation
@testable import RelayCore
import Testing

/// The waiting calls' state value driven by events alone, with instants of the tests' own:
/// each step of a call and each race its waiter has met (a lost settle result, a reaped
/// request, a row lost in a crash, a hang-up mid-call, a late answer) as a deterministic
/// sequence; InstanceDriverLocateTests run the same through Postgres.
@Suite struct WaiterStateTests {
    typealias Action = WaiterState.Action
    let start = ContinuousClock.now
    let id = UUID()
    let owner = UUID()

    func waiter(timeout: Duration = .seconds(30), bound: Duration? = nil, email: String? = "ada@example.com")
        -> WaiterState.Waiter {
        WaiterState.Waiter(request: .init(owner: owner, email: email, timeout: timeout, callBound: bound, resumable: bound != nil),
                           publicKey: Array(repeating: 1, count: 32), expiresAt: Date().addingTimeInterval(30), calledAt: start)
    }

    func opened(ping: Bool = true) -> RelayRows.Opened {
        .init(status: .opened, connections: 1,
              ping: ping ? LocateMessage(id: id, clientID: "agent", expiresMs: 1, requester: nil, replyKey: nil) : nil)
    }

    func answer(_ outcome: RelayStatus.Outcome = .denied, reason: String? = "user") -> AnswerNotification {
        AnswerNotification(id: id, waiter: "here", outcome: outcome, reason: reason, sealed: nil)
    }

    /// Opens a call and its request; the state and the open's actions.
    func openedCall(_ waiter: WaiterState.Waiter) -> (WaiterState, [Action]) {
        var state = WaiterState(grace: .seconds(2))
        guard case .open(id, again: false)? = state.handle(.called(id, waiter), now: start).first else {
            Issue.record("opens")
            return (state, [])
        }
        let actions = state.handle(.opened(id, .success(opened())), now: start + .milliseconds(5))
        return (state, actions)
    }

    /// A call opens its request, pings the phones here, starts the pushes and waits until
    /// the deadline plus the grace (counted from the call); the answer stops the pushes
    /// and completes it.
    @Test func aCallWaitsForItsAnswer() throws {
        var (state, actions) = openedCall(waiter())
        guard actions.count == 3, case .ping(id, _, owner)? = actions.first, case .pushesOpened(id, 1, _) = actions[1],
              case .arm(id, .deadline, let delay) = actions[2] else { Issue.record("\(actions)"); return }
        #expect(delay == .seconds(32) - .milliseconds(5))
        let done = state.handle(.answer(answer(), fix: nil), now: start + .seconds(1))
        #expect(done.labels == ["wakePolls", "cancelTimer", "complete", "pushesSettled"], "the agent waits for no push")
        guard done.count == 4, case .complete(id, .answered(let answer, nil)) = done[2] else { Issue.record("answered"); return }
        #expect(answer.outcome == .denied && state.count == 0)
        #expect(state.handled(.answer(self.answer(), fix: nil), now: start).labels == ["wakePolls", "pushesSettled"],
                "a late duplicate only stops pushes")
    }

    /// No answer by the deadline: finish decides between 504 (a device got the ping) and
    /// 503 (none did); an unreachable database at the deadline is still 504.
    @Test func theDeadlineFinishesTheRequest() throws {
        for (finished, expected) in [
            (Result<RelayRows.Finished, any Error>.success(.init(status: .finished, delivered: true, outcome: nil, reason: nil)),
             LocateOutcome.failure(.phoneSilent)),
            (.success(.init(status: .finished, delivered: false, outcome: nil, reason: nil)),
             .failure(.notConnected(email: "ada@example.com"))),
            (.failure(CancellationError()), .failure(.phoneSilent)),
            // Reaped while this instance could not beat.
            (.success(.init(status: .alreadySettled, delivered: false, outcome: .expired, reason: nil)),
             .failure(.notConnected(email: "ada@example.com"))),
        ] {
            var (state, _) = openedCall(waiter())
            #expect(state.handled(.timerFired(id, .deadline), now: start).labels == ["pushesSettled", "finish"])
            guard case .complete(id, .outcome(let outcome))? = state.handle(.finished(id, finished), now: start).last else {
                Issue.record("completes"); continue
            }
            #expect(outcome == expected)
        }
    }

    /// A late settle: finish finds the request answered at the last moment and waits a
    /// second for its notification; a fix whose notification never comes is asked for
    /// again from its sealer, and only then is it 504 — never "no fix".
    @Test func aLateAnswerIsAwaitedAndAMissedFixReplayed() throws {
        var (state, _) = openedCall(waiter())
        _ = state.handle(.timerFired(id, .deadline), now: start)
        let late = RelayRows.Finished(status: .alreadySettled, delivered: true, outcome: .location, reason: nil)
        guard case .arm(id, .lastMoment(late), .seconds(1))? = state.handle(.finished(id, .success(late)), now: start).last else {
            Issue.record("waits a moment"); return
        }
        let replay = state.handle(.timerFired(id, .lastMoment(late)), now: start)
        guard case .requestReplay([id])? = replay.first, case .arm(id, .replay, .seconds(3))? = replay.last else {
            Issue.record("\(replay)"); return
        }
        let replayed = state.handle(.answer(answer(.location, reason: nil), fix: nil), now: start)
        #expect(replayed.labels == ["wakePolls", "cancelTimer", "complete"], "the replay completes it; pushes stopped already")
        var (silent, _) = openedCall(waiter())
        _ = silent.handle(.timerFired(id, .deadline), now: start)
        let denied = RelayRows.Finished(status: .alreadySettled, delivered: true, outcome: .denied, reason: "user")
        _ = silent.handle(.finished(id, .success(denied)), now: start)
        guard case .complete(id, .answered(let answer, nil))? = silent.handle(.timerFired(id, .lastMoment(denied)), now: start).last
        else { Issue.record("from the row"); return }
        #expect(answer.outcome == .denied && answer.reason == "user")
    }

    /// A lost settle result: a phone here answered, the settle committed but its result
    /// never came back; the resync finds the row settled with a location and hands over
    /// the fix kept while settling (it was never sealed, so no replay could bring it).
    @Test func aLostSettleResultIsDeliveredByTheResync() throws {
        var (state, _) = openedCall(waiter())
        let fix = LocationFix(latitude: 1, longitude: 2, accuracyM: 3, timestampMs: 4, deviceName: "Here", platform: "ios")
        guard case .keptHere(id)? = state.handle(.settling(id, fix), now: start).first else {
            Issue.record("the call waiting here keeps the fix"); return
        }
        #expect(state.unanswered == [id])
        let row = RelayRows.RequestState(id: id, settled: true, outcome: .location, reason: nil, delivered: true)
        let actions = state.handle(.states([row], asked: [id]), now: start)
        let delivered = actions.compactMap { action -> LocationFix? in
            if case .complete(id, .answered(_, let fix?)) = action { fix } else { nil }
        }
        #expect(delivered == [fix], "\(actions.labels)")
        var (sealed, _) = openedCall(waiter())
        guard case .requestReplay([id])? = sealed.handle(.states([row], asked: [id]), now: start).last else {
            Issue.record("a fix sealed elsewhere is replayed"); return
        }
    }

    /// The instance's stop ends every call still here at once — one whose caller hung up
    /// (kept only for the calls that join it) as well as one still waiting — with the error
    /// given, its timer stopped and its pushes ended; none is left behind.
    @Test func theStopEndsEveryCallLeft() throws {
        var (state, _) = openedCall(waiter())
        _ = state.handle(.hungUp(id), now: start)
        #expect(state.count == 1, "a hung-up call stays for the calls that join it")
        let stopped = state.handle(.stopping(StopTestError.stopped), now: start)
        #expect(stopped.labels == ["cancelTimer", "pushesSettled", "complete"], "\(stopped.labels)")
        guard case .complete(id, .failed(let error))? = stopped.last, error is StopTestError else {
            Issue.record("failed with the stop's error"); return
        }
        #expect(state.count == 0)
    }

    /// A reaped request ends its wait at the resync (finish then reports how); a row lost
    /// in a Postgres crash is opened again while its call still waits.
    @Test func theResyncEndsReapedWaitsAndReopensLostRows() throws {
        var (state, _) = openedCall(waiter())
        let reaped = RelayRows.RequestState(id: id, settled: true, outcome: .expired, reason: nil, delivered: false)
        #expect(state.handled(.states([reaped], asked: [id]), now: start).labels
                == ["cancelTimer", "pushesSettled", "finish"])
        var (lost, _) = openedCall(waiter())
        guard case .open(id, again: true)? = lost.handle(.states([], asked: [id]), now: start).first else {
            Issue.record("re-opened"); return
        }
        #expect(lost.handled(.states([], asked: [id]), now: start + .seconds(60)).isEmpty,
                "not past its expiry")
    }

    /// The agent withdraws (an explicit cancel, a revoked key): during the wait the request
    /// is abandoned at once; during the open it is abandoned as soon as the open returns; an
    /// answer that arrives then does not reach a caller who is gone. A hang-up of a call
    /// that cannot outlive itself is not a refusal: it keeps waiting for its answer.
    @Test func aWithdrawalAbandonsTheRequestAndAHangUpKeepsIt() throws {
        var (state, _) = openedCall(waiter())
        #expect(state.handled(.withdrawn(id), now: start).labels == ["cancelTimer", "pushesSettled", "finish"])
        #expect(state.handled(.answer(answer(), fix: nil), now: start).labels == ["wakePolls"], "kept, not completed")
        guard case .complete(id, .outcome(.abandoned))? = state.handle(.finished(id, .failure(CancellationError())), now: start)
            .last else { Issue.record("abandoned"); return }
        var opening = WaiterState(grace: .seconds(2))
        _ = opening.handle(.called(id, waiter()), now: start)
        #expect(opening.handled(.withdrawn(id), now: start).isEmpty)
        #expect(opening.handled(.opened(id, .success(opened(ping: false))), now: start).labels
                == ["pushesOpened", "pushesSettled", "finish"])
        var (kept, _) = openedCall(waiter())
        #expect(kept.handled(.hungUp(id), now: start).isEmpty, "still waiting for the person")
        #expect(kept.handled(.answer(answer(), fix: nil), now: start).labels == ["wakePolls", "cancelTimer", "complete", "pushesSettled"])
    }

    /// A resumable call whose caller goes away (a client's timeout, a closed stream) is not a
    /// refusal: the request is made durable at once and stays open for the person — during
    /// the wait, or as soon as an open the hang-up interrupted returns. A withdrawal (an
    /// explicit cancel, a revoked credential) abandons it.
    @Test func aHangUpOfAResumableCallKeepsTheRequestAndAWithdrawalEndsIt() throws {
        var (state, _) = openedCall(waiter(bound: .seconds(5)))
        #expect(state.handled(.hungUp(id), now: start).labels == ["cancelTimer", "makeDurable"])
        guard case .complete(id, .outcome(.waiting))? = state.handle(.madeDurable(id, .success(.durable)), now: start).last else {
            Issue.record("outlives its call"); return
        }
        var opening = WaiterState(grace: .seconds(2))
        _ = opening.handle(.called(id, waiter(bound: .seconds(5))), now: start)
        #expect(opening.handled(.hungUp(id), now: start).isEmpty)
        #expect(opening.handled(.opened(id, .success(opened(ping: false))), now: start).labels == ["pushesOpened", "makeDurable"])
        var withdrawn = openedCall(waiter(bound: .seconds(5))).0
        #expect(withdrawn.handled(.withdrawn(id), now: start).labels == ["cancelTimer", "pushesSettled", "finish"])
        guard case .complete(id, .outcome(.abandoned))? = withdrawn.handle(.finished(id, .failure(CancellationError())), now: start)
            .last else { Issue.record("abandoned"); return }
    }

    /// A call with a wait bound: at the bound the request is made durable and the call
    /// answers "still waiting"; when it settled meanwhile, its answer is awaited a second.
    @Test func aBoundedCallOutlivesItsCallOrTakesTheSettledAnswer() throws {
        var (state, actions) = openedCall(waiter(bound: .seconds(5)))
        guard case .arm(id, .bound, .seconds(5))? = actions.last else { Issue.record("\(actions)"); return }
        #expect(state.handled(.timerFired(id, .bound), now: start).labels == ["makeDurable"])
        guard case .complete(id, .outcome(.waiting))? = state.handle(.madeDurable(id, .success(.durable)), now: start).last else {
            Issue.record("still waiting"); return
        }
        var (settled, _) = openedCall(waiter(bound: .seconds(5)))
        _ = settled.handle(.timerFired(id, .bound), now: start)
        _ = settled.handle(.answer(answer(), fix: nil), now: start)  // arrives during make_durable: kept
        #expect(settled.handled(.madeDurable(id, .success(.settled)), now: start).labels
                == ["cancelTimer", "complete", "pushesSettled"])
    }

    /// Refusals and failures complete the call at once: too many waiting, an open the
    /// database refused; a stale timer is ignored.
    @Test func refusalsAndStaleTimers() throws {
        var state = WaiterState(grace: .seconds(2))
        _ = state.handle(.called(id, waiter()), now: start)
        let full = RelayRows.Opened(status: .tooMany, connections: nil, ping: nil)
        guard case .complete(id, .outcome(.failure(.tooManyWaiting)))? = state.handle(.opened(id, .success(full)), now: start)
            .last else { Issue.record("429"); return }
        _ = state.handle(.called(id, waiter()), now: start)
        guard case .complete(id, .failed)? = state.handle(.opened(id, .failure(CancellationError())), now: start).last else {
            Issue.record("503"); return
        }
        var (waiting, _) = openedCall(waiter())
        #expect(waiting.handled(.timerFired(id, .bound), now: start).isEmpty, "not the current wait")
        #expect(waiting.count == 1)
    }

    /// A database result for a call not waiting for it cannot happen: it changes nothing and
    /// is answered with `unexpected` (logged and counted), never dropped silently.
    @Test func impossibleEventsAreAnsweredExplicitly() throws {
        var (waiting, _) = openedCall(waiter())
        let opened = RelayRows.Opened(status: .opened, connections: 1, ping: nil)
        let events: [(WaiterState.Event, String)] = [
            (.opened(id, .success(opened)), "opened"), (.madeDurable(id, .failure(CancellationError())), "made_durable"),
            (.finished(id, .failure(CancellationError())), "finished"), (.opened(UUID(), .success(opened)), "opened"),
        ]
        for (event, name) in events {
            let actions = waiting.handled(event, now: start)
            guard actions.count == 1, case .unexpected(_, let reported) = actions[0] else {
                Issue.record("\(name): \(actions)"); continue
            }
            #expect(reported == name)
        }
        #expect(waiting.count == 1 && waiting.waiters[id]?.phase == .waiting(.deadline), "nothing changed")
    }
}

extension WaiterState {
    /// `handle` for use inside `#expect` (which takes no mutating call).
    mutating func handled(_ event: Event, now: ContinuousClock.Instant) -> [Action] { handle(event, now: now) }
}

extension Array where Element == WaiterState.Action {
    /// Each action's name, for comparing sequences.
    var labels: [String] {
        map { action in
            switch action {
            case .open: "open"
            case .ping: "ping"
            case .pushesOpened: "pushesOpened"
            case .pushesSettled: "pushesSettled"
            case .arm: "arm"
            case .cancelTimer: "cancelTimer"
            case .makeDurable: "makeDurable"
            case .finish: "finish"
            case .requestReplay: "requestReplay"
            case .wakePolls: "wakePolls"
            case .complete: "complete"
            case .unexpected: "unexpected"
            case .keptHere: "keptHere"
            case .recreated: "recreated"
            case .reopenFailed: "reopenFailed"
            }
        }
    }
}

private enum StopTestError: Error {
    case stopped
}
