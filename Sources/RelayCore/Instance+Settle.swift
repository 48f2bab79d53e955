import Foundation

/// A phone's answer on its way to the database, and the open of a durable request, as
/// transitions of the instance's value: every decision is here, and the driver only
/// performs the sealing, the database calls and the hand-over of their results.
///
/// A fix for a call waiting here is kept by that call (`settling` → `keptHere`) and settled
/// as `local_location`, unsealed: it never crosses Postgres. Any other fix is sealed to the
/// request's reply key (the ping's, or asked for) first. The settle's result: an answer
/// settled here reaches the call waiting here (and, without a socket, the phones here that
/// got the ping are told it ended); a kept fix whose settle lost is dropped; a settle that
/// failed leaves a kept fix in place (whether it committed, the resync reads); then the
/// socket's phones' `settled` event, or the caller's `settleDone`.
extension Instance {
    /// Decides how a settlement goes to the database.
    mutating func settling(_ settlement: Settlement, now: Moment, into actions: inout [Action]) {
        switch settlement.answer {
        case .plain(let answer):
            actions.append(.settle(settlement, answer))
        case .fix(let fix):
            waiters.handle(.settling(settlement.id, fix), now: now.instant, into: &waiterActions)
            let kept = waiterActions.contains { if case .keptHere(settlement.id) = $0 { true } else { false } }
            clear(&waiterActions)
            if kept {
                actions.append(.settle(settlement, .localLocation))
            } else if let key = settlement.replyKey {
                actions.append(.seal(settlement, fix, key: key))
            } else {
                actions.append(.fetchReplyKey(settlement, fix))
            }
        }
    }

    /// A settle came back.
    mutating func settled(_ settlement: Settlement, _ answer: PhoneAnswer?, _ result: Result<RelayStatus.Settle, any Error>,
                          now: Moment, into actions: inout [Action]) {
        let id = settlement.id
        if case .success(let status) = result, let answer {
            if status != .settled, answer == .localLocation { waitersHandle(.settledElsewhere(id), now: now, into: &actions) }
            if status == .settled {
                if case .location(let sealed) = answer { actions.append(.rememberSealed(id, sealed)) }
                let notification = AnswerNotification(id: id, waiter: "", outcome: answer.outcome, reason: answer.reason,
                                                      sealed: answer.sealed)
                waitersHandle(.answer(notification, fix: settlement.fix), now: now, into: &actions)
                if settlement.cancelPings { phonesHandle(.cancel(id), now: now, into: &actions) }
            }
        }
        switch settlement.origin {
        case .socket(let answer):
            // Nil: the database could not take it, and the phones hold it for the resync.
            phonesHandle(.settled(answer, try? result.get()), now: now, into: &actions)
        case .caller(let ticket):
            actions.append(.settleDone(ticket: ticket, result))
        }
    }

    /// A durable request's open came back; its call completes with what it means.
    mutating func durableOpened(_ id: UUID, _ waiter: WaiterState.Waiter, _ result: Result<RelayRows.Opened, any Error>,
                                now: Moment, into actions: inout [Action]) {
        let completion: WaiterState.Completion
        switch result {
        case .failure(let error):
            completion = .failed(error)
        case .success(let opened) where opened.status == .tooMany || opened.status == .full:
            completion = .outcome(.failure(.tooManyWaiting))
        case .success(let opened) where opened.status == .quiet:
            // Answered at once: nobody is asked during quiet hours.
            completion = .outcome(opened.quiet.map { .failure(.quietHours(name: $0.name, until: $0.until, local: $0.local)) }
                                  ?? .failure(.noFix))
        case .success(let opened):
            if let ping = opened.ping { phonesHandle(.locate(ping, owner: waiter.request.owner), now: now, into: &actions) }
            pushesOpened(id, connections: opened.connections ?? 0, expires: waiter.expiresAt, now: now, into: &actions)
            completion = .outcome(.waiting(expiresAt: waiter.expiresAt))
        }
        actions.append(.waiters(.complete(id, completion)))
    }
}
