import Foundation

/// The transitions behind `WaiterState.handle(_:now:)`.
extension WaiterState {
    /// Handles one event at `now`; the actions to perform, in order.
    mutating func handle(_ event: Event, now: ContinuousClock.Instant) -> [Action] {
        var actions: [Action] = []
        handle(event, now: now, into: &actions)
        return actions
    }

    /// Handles one event at `now`, appending the actions to perform, in order, to `actions`
    /// (an executor's queue: no array is made per event).
    mutating func handle(_ event: Event, now: ContinuousClock.Instant, into actions: inout [Action]) {
        let clockNow = now
        switch event {
        case .called(let id, let waiter):
            waiters[id] = waiter
            actions.append(.open(id, again: false))
        case .opened(let id, let result):
            guard let waiter = waiters[id], waiter.phase == .opening else {
                actions.append(.unexpected(id, event: "opened"))
                break
            }
            switch result {
            case .failure(let error):
                complete(id, .failed(error), into: &actions)
            case .success(let opened) where opened.status == .tooMany || opened.status == .full:
                complete(id, .outcome(.failure(.tooManyWaiting)), into: &actions)
            case .success(let opened) where opened.status == .quiet:
                complete(id, .outcome(opened.quiet.map { .failure(.quietHours(name: $0.name, until: $0.until, local: $0.local)) }
                                      ?? .failure(.noFix)), into: &actions)
            case .success(let opened):
                if let ping = opened.ping { actions.append(.ping(id, ping, owner: waiter.request.owner)) }
                actions.append(.pushesOpened(id, connections: opened.connections ?? 0, expires: waiter.expiresAt))
                let total = waiter.request.timeout + grace
                if let bound = waiter.request.callBound, bound < total {
                    wait(id, .bound, after: bound, into: &actions)
                } else {
                    wait(id, .deadline, after: waiter.calledAt + total - now, into: &actions)
                }
            }
        case .answer(let answer, let fix):
            actions.append(.wakePolls(answer.id))
            guard var waiter = waiters[answer.id], waiter.answer == nil else {
                // A durable request opened here: its pushes stop (the answer is kept in Postgres).
                actions.append(.pushesSettled(answer.id))
                break
            }
            waiter.answer = answer
            waiter.fix = fix
            waiters[answer.id] = waiter
            // Kept for the next wait while a database call runs.
            if case .waiting(let wait) = waiter.phase { answered(answer.id, wait, into: &actions) }
        case .timerFired(let id, let wait):
            guard waiters[id]?.phase == .waiting(wait) else { break }
            waitEnded(id, wait, into: &actions)
        case .expire(let id):
            guard case .waiting(let wait)? = waiters[id]?.phase else { break }
            actions.append(.cancelTimer(id))
            waitEnded(id, wait, into: &actions)
        case .hungUp(let id):
            guard waiters[id] != nil else { break }
            waiters[id]!.callerGone = true
            // A resumable request outlives its call now (or at the next step when it is not
            // in its main wait); another keeps waiting for its answer or its deadline here,
            // for the calls that join it.
            guard waiters[id]!.resumable, case .waiting(let wait) = waiters[id]!.phase, wait.isMain else { break }
            actions.append(.cancelTimer(id))
            outlive(id, into: &actions)
        case .withdrawn(let id):
            guard waiters[id] != nil else { break }
            waiters[id]!.withdrawn = true
            guard case .waiting(let wait) = waiters[id]!.phase else { break }  // taken at the next step
            actions.append(.cancelTimer(id))
            waitEnded(id, wait, into: &actions)
        case .madeDurable(let id, let result):
            guard let waiter = waiters[id], waiter.phase == .makingDurable else {
                actions.append(.unexpected(id, event: "made_durable"))
                break
            }
            switch result {
            case .failure(let error): complete(id, .failed(error), into: &actions)
            case .success(.durable): complete(id, .outcome(.waiting(expiresAt: waiter.expiresAt)), into: &actions)
            case .success: wait(id, .settledAtBound, after: Self.lateAnswerWait, into: &actions)
            }
        case .finished(let id, let result):
            guard let waiter = waiters[id], case .finishing(let abandoned) = waiter.phase else {
                actions.append(.unexpected(id, event: "finished"))
                break
            }
            if abandoned {
                complete(id, .outcome(.abandoned), into: &actions)  // a failed abandon was logged
                break
            }
            finished(id, waiter, result, into: &actions)
        case .states(let states, let asked):
            resynced(states, asked: asked, into: &actions, now: clockNow)
        case .reopened(let id, let result):
            switch result {
            case .failure(let error):
                actions.append(.reopenFailed(id, error))
            case .success(let opened) where opened.status == .opened:
                actions.append(.recreated(id))
                // Pinged only while its call still waits (it may have ended during the open).
                if let ping = opened.ping, let waiter = waiters[id] { actions.append(.ping(id, ping, owner: waiter.request.owner)) }
            case .success:
                break
            }
        case .settling(let id, let fix):
            guard let waiter = waiters[id], waiter.answer == nil, !waiter.resumable else { break }
            waiters[id]!.settlingFix = fix
            actions.append(.keptHere(id))
        case .settledElsewhere(let id):
            waiters[id]?.settlingFix = nil
        case .stopping(let error):
            for id in waiters.keys.sorted(by: { $0.uuidString < $1.uuidString }) {
                actions.append(.cancelTimer(id))
                actions.append(.pushesSettled(id))
                complete(id, .failed(error), into: &actions)
            }
        }
    }

    /// Starts a wait: an answer that came meanwhile ends it at once, and so do a withdrawal
    /// and, for the main wait, a hang-up.
    private mutating func wait(_ id: UUID, _ wait: Wait, after delay: Duration, into actions: inout [Action]) {
        waiters[id]!.phase = .waiting(wait)
        if waiters[id]!.answer != nil {
            answered(id, wait, into: &actions)
        } else if waiters[id]!.withdrawn {
            waitEnded(id, wait, into: &actions)
        } else if waiters[id]!.callerGone, waiters[id]!.resumable, wait.isMain {
            outlive(id, into: &actions)
        } else {
            actions.append(.arm(id, wait, after: max(.zero, delay)))
        }
    }

    /// The answer ended a wait.
    /// The call completes first and its pushes stop after: the agent's answer waits for
    /// nobody (the stop still comes after the pushes' start, in the actions' order).
    private mutating func answered(_ id: UUID, _ wait: Wait, into actions: inout [Action]) {
        let waiter = waiters[id]!
        actions.append(.cancelTimer(id))
        if wait.isMain, waiter.withdrawn {
            actions.append(.pushesSettled(id))
            return abandon(id, into: &actions)
        }
        complete(id, .answered(waiter.answer!, fix: waiter.fix), into: &actions)
        if wait.isMain { actions.append(.pushesSettled(id)) }
    }

    /// A wait ran out (its timer, a reaped request, or the agent hung up).
    private mutating func waitEnded(_ id: UUID, _ wait: Wait, into actions: inout [Action]) {
        let waiter = waiters[id]!
        switch wait {
        case .bound where !waiter.withdrawn:
            // The call's wait bound: the request outlives the call from now on, and the agent
            // comes back with its token (unless it settled meanwhile).
            outlive(id, into: &actions)
        case .bound, .deadline, .settledAtBound:
            actions.append(.pushesSettled(id))
            if waiter.withdrawn { return abandon(id, into: &actions) }
            waiters[id]!.phase = .finishing(abandoned: false)
            actions.append(.finish(id, abandoned: false))
        case .lastMoment(let finished) where finished.outcome == .location:
            // A sealed fix whose notification this instance missed (its LISTEN connection was
            // replaced, or the settle ran late on a server that had hung): its sealer is asked
            // to send it again, and a fix the phone sent is never reported as "no fix".
            actions.append(.requestReplay([id]))
            self.wait(id, .replay, after: Self.lateReplayWait, into: &actions)
        case .lastMoment(let finished):
            let answer = AnswerNotification(id: id, waiter: "", outcome: finished.outcome ?? .unavailable,
                                            reason: finished.reason ?? "error", sealed: nil)
            complete(id, .answered(answer, fix: nil), into: &actions)
        case .replay:
            complete(id, .outcome(.failure(.phoneSilent)), into: &actions)
        }
    }

    /// The request outlives its call from now on (the call's bound, or the caller went
    /// away): made durable, its pushes go on, and the agent comes back with its token or
    /// joins it by asking again (unless it settled meanwhile).
    private mutating func outlive(_ id: UUID, into actions: inout [Action]) {
        waiters[id]!.phase = .makingDurable
        actions.append(.makeDurable(id))
    }

    /// The request was withdrawn: it is abandoned (which cancels its pings).
    private mutating func abandon(_ id: UUID, into actions: inout [Action]) {
        waiters[id]!.phase = .finishing(abandoned: true)
        actions.append(.finish(id, abandoned: true))
    }

    /// `finish` at the deadline came back.
    private mutating func finished(_ id: UUID, _ waiter: Waiter, _ result: Result<RelayRows.Finished, any Error>,
                                   into actions: inout [Action]) {
        let email = waiter.request.email
        guard case .success(let finished) = result else {
            // The database is unreachable at the deadline: the deadline still holds.
            return complete(id, .outcome(.failure(.phoneSilent)), into: &actions)
        }
        let silent: LocateOutcome = finished.delivered == true ? .failure(.phoneSilent) : .failure(.notConnected(email: email))
        guard finished.status == .alreadySettled else { return complete(id, .outcome(silent), into: &actions) }
        if finished.outcome == .expired || finished.outcome == .abandoned {
            // Reaped while this instance could not beat (a long database outage).
            return complete(id, .outcome(silent), into: &actions)
        }
        // An answer won at the last moment; its notification is on its way.
        wait(id, .lastMoment(finished), after: Self.lateAnswerWait, into: &actions)
    }

    /// A resync read the rows: answers whose notification was lost are delivered (a sealed
    /// fix is asked for again from the instance that sealed it), requests reaped meanwhile
    /// end their wait, and rows lost in a Postgres crash are opened again.
    private mutating func resynced(_ states: [RelayRows.RequestState], asked: [UUID], into actions: inout [Action],
                                   now clock: ContinuousClock.Instant) {
        var replay: [UUID] = []
        for state in states where state.settled {
            switch state.outcome {
            case .location? where waiters[state.id]?.settlingFix != nil:
                // Settled here in process; the settle's own result never came back.
                let answer = AnswerNotification(id: state.id, waiter: "", outcome: .location, reason: nil, sealed: nil)
                handle(.answer(answer, fix: waiters[state.id]?.settlingFix), now: clock, into: &actions)
            case .location?:
                replay.append(state.id)
            case .denied?, .unavailable?:
                let answer = AnswerNotification(id: state.id, waiter: "", outcome: state.outcome!, reason: state.reason, sealed: nil)
                handle(.answer(answer, fix: nil), now: clock, into: &actions)
            case .expired?, .abandoned?, nil:
                handle(.expire(state.id), now: clock, into: &actions)  // expired or abandoned by a reaper: finish reports it
            }
        }
        if !replay.isEmpty { actions.append(.requestReplay(replay)) }
        let present = Set(states.map(\.id))
        for id in asked where !present.contains(id) {
            // Still due: its phone's deadline (`expiresAt`, timeout after the call began) is ahead.
            guard let waiter = waiters[id], waiter.answer == nil, waiter.calledAt + waiter.request.timeout > clock else { continue }
            actions.append(.open(id, again: true))
        }
    }

    /// The call ends; its waiter is forgotten.
    private mutating func complete(_ id: UUID, _ completion: Completion, into actions: inout [Action]) {
        waiters[id] = nil
        // A surge's table is given back; a small one is kept, or the next call would make it again.
        if waiters.isEmpty, waiters.capacity > 64 { waiters = [:] }
        actions.append(.complete(id, completion))
    }
}
