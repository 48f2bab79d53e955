import Foundation
@testable import RelayCore
import Testing

/// The instance's one value, driven by events alone: what crosses between its phones and
/// the calls waiting on it — a request opened here pings the phones here in the same event,
/// a fix answered here stays with the call waiting here, an answer settled here completes
/// that call and ends the other phones' prompts. Each side alone is driven by
/// `InstanceStateTests` and `WaiterStateTests`.
@Suite struct InstanceTests {
    typealias Phone = InstanceStateTests.Phone
    typealias Value = Instance

    let owner = UUID()
    let id = UUID()
    let now = Date(timeIntervalSince1970: 1_800_000_000)
    let start = ContinuousClock.now
    /// The clock's one reading every event of these tests happens at.
    var moment: Moment { Moment(instant: start, date: now) }
    let fix = LocationFix(latitude: 1, longitude: 2, accuracyM: 3, timestampMs: 4, deviceName: "Here", platform: "ios")

    /// An instance with one registered phone of the owner (and push plans with `pushes`).
    func instance(with phone: Phone, pushes: PushTiming? = nil) -> Value {
        var value = Value(phones: InstanceState(helloBatch: 250, disconnectWindow: .milliseconds(50), maximumDisconnects: 1000,
                                                deliveredMarkDelay: .milliseconds(200), maximumDelivered: 1000),
                          waiters: WaiterState(grace: .seconds(2)), pushTiming: pushes)
        _ = value.handle(.phones(.opened(phone)), at: moment)
        let batch = value.handle(.phones(.received(phone, .hello(deviceID: UUID(), name: "Ada's phone", platform: "ios",
                                                                  appVersion: "1"))), at: moment)
            .compactMap { action -> [InstanceState.Hello]? in
                if case .phones(.registerHellos(let batch, _)) = action { batch } else { nil }
            }
        let hellos = batch.flatMap { $0 }
        _ = value.handle(.phones(.hellosRegistered(hellos, .init(statuses: [phone.connection: .ok], pending: []), batched: true)),
                         at: moment)
        return value
    }

    func waiter(resumable: Bool = false) -> WaiterState.Waiter {
        WaiterState.Waiter(request: .init(owner: owner, email: nil, timeout: .seconds(30),
                                          callBound: resumable ? .seconds(5) : nil, resumable: resumable),
                           publicKey: Array(repeating: 1, count: 32), expiresAt: now.addingTimeInterval(30), calledAt: start)
    }

    func opened() -> RelayRows.Opened {
        .init(status: .opened, connections: 1,
              ping: LocateMessage(id: id, clientID: "agent", expiresMs: Int64((now.timeIntervalSince1970 + 30) * 1000),
                                  requester: nil, replyKey: Array(repeating: 1, count: 32)))
    }

    /// The texts sent to `phone` among `actions`.
    func sent(to phone: Phone, _ actions: [Value.Action]) -> [String] {
        actions.compactMap { action in
            if case .phones(.send(let to, let text)) = action, to === phone { text } else { nil }
        }
    }

    /// A request opened here pings the owner's phone here in the event that saw it opened,
    /// before the pushes start: the waiters' ping is the phones' locate, with no hop between
    /// executors and no action left for the driver to route.
    @Test func anOpenedRequestPingsThePhonesHereInTheSameEvent() throws {
        let phone = Phone(user: owner)
        var value = instance(with: phone, pushes: PushTiming())
        _ = value.handle(.waiters(.called(id, waiter())), at: moment)
        let actions = value.handle(.waiters(.opened(id, .success(opened()))), at: moment)
        #expect(sent(to: phone, actions).count == 1 && sent(to: phone, actions)[0].contains(#""type":"locate""#), "\(actions)")
        let pinged = actions.firstIndex { if case .phones(.send) = $0 { true } else { false } }
        let pushed = actions.firstIndex { if case .push(id, .arm(.wake, _)) = $0 { true } else { false } }
        #expect(pinged != nil && pushed != nil && pinged! < pushed!, "the ping, then the pushes: \(actions)")
        #expect(!actions.contains { if case .waiters(.ping) = $0 { true } else { false } }, "no ping left to route")
        #expect(value.phones.pings.contains(id), "the ping is in the phones' ledger")
    }

    /// A call whose answer came while it opened (a phone on another instance was quicker
    /// than the open's result) completes in the event that saw it opened, and pings nobody
    /// here: its request is settled already.
    @Test func aCallAnsweredWhileItOpenedPingsNobody() throws {
        let phone = Phone(user: owner)
        var value = instance(with: phone)
        _ = value.handle(.waiters(.called(id, waiter())), at: moment)
        let answer = AnswerNotification(id: id, waiter: "here", outcome: .denied, reason: "user", sealed: nil)
        _ = value.handle(.waiters(.answer(answer, fix: nil)), at: moment)
        let actions = value.handle(.waiters(.opened(id, .success(opened()))), at: moment)
        #expect(sent(to: phone, actions).isEmpty, "\(actions)")
        #expect(actions.contains { if case .waiters(.complete(id, .answered)) = $0 { true } else { false } })
        #expect(!value.phones.pings.contains(id))
    }

    /// A socket's answer here, as the value settles it: the waiting call keeps the fix, and
    /// it is settled unsealed (`local_location`); the settle's win hands it over and ends the
    /// other phones' prompts; the socket's phones then take the status.
    func socketAnswer(_ phone: Phone, _ value: inout Value) -> [Value.Action] {
        let reply = PhoneMessage.PhoneReply.location(latitude: 1, longitude: 2, accuracyM: 3, timestampMs: 4,
                                                     altitudeM: nil, speedMps: nil, headingDeg: nil)
        return value.handle(.phones(.received(phone, .answer(id: id, reply))), at: moment)
    }

    /// A fix answered here for a call waiting here stays with the call (it is never sealed);
    /// the settle's win hands it over. A resumable call's fix travels sealed (the agent may
    /// fetch it elsewhere), and so does one for a request that does not wait here: sealed to
    /// the ping's key, or to the key the driver is asked to look up.
    @Test func aFixAnsweredHereStaysWithTheCallWaitingHere() throws {
        let phone = Phone(user: owner)
        var value = instance(with: phone)
        _ = value.handle(.waiters(.called(id, waiter())), at: moment)
        _ = value.handle(.waiters(.opened(id, .success(opened()))), at: moment)
        let asked = socketAnswer(phone, &value)
        guard case .settle(let settlement, .localLocation)? = asked.last else { Issue.record("kept here: \(asked)"); return }
        #expect(settlement.fix?.latitude == 1 && settlement.fix?.deviceName == "Ada's phone")
        let actions = value.handle(.settled(settlement, .localLocation, .success(.settled)), at: moment)
        let completed = actions.compactMap { action -> LocationFix? in
            if case .waiters(.complete(id, .answered(_, let fix?))) = action { fix } else { nil }
        }
        #expect(completed == [settlement.fix!], "\(actions)")
        #expect(!actions.contains { if case .rememberSealed = $0 { true } else { false } }, "nothing sealed to remember")

        let elsewhere = UUID()
        let answer = Settlement(ticket: UUID(), id: elsewhere, user: owner, reply: .place(name: "Home", timestampMs: 1))
        guard case .fetchReplyKey(_, let placeFix)? = value.handle(.answered(answer), at: moment).first, placeFix.place == "Home" else {
            Issue.record("not waiting here, no key: looked up"); return
        }
        guard case .seal(_, _, key: [9])? = value.handle(.replyKey(answer, placeFix, .success([9])), at: moment).first else {
            Issue.record("sealed to the key found"); return
        }
        guard case .settle(_, .unavailable(.error))? = value.handle(.replyKey(answer, placeFix, .success(nil)), at: moment).first else {
            Issue.record("no key: the settle says gone or forbidden"); return
        }

        var resumable = instance(with: phone)
        _ = resumable.handle(.waiters(.called(id, waiter(resumable: true))), at: moment)
        _ = resumable.handle(.waiters(.opened(id, .success(opened()))), at: moment)
        guard case .seal(_, _, key: let key)? = socketAnswer(phone, &resumable).last else {
            Issue.record("a resumable call's fix is sealed, to the ping's key"); return
        }
        #expect(key == Array(repeating: 1, count: 32))
    }

    /// The settle's result decides: a sealed fix that won is remembered for a replay and
    /// reaches the call here; without a socket the phones here that got the ping are told it
    /// ended and the caller takes the status; a socket's phones take theirs (a failed settle:
    /// nil, held for the resync, and a kept fix whose settle committed though its result was
    /// lost is handed over by the next resync).
    @Test func theSettlesResultGoesWhereItBelongs() throws {
        let phone = Phone(user: owner)
        var value = instance(with: phone)
        _ = value.handle(.waiters(.called(id, waiter(resumable: true))), at: moment)
        _ = value.handle(.waiters(.opened(id, .success(opened()))), at: moment)
        let ticket = UUID()
        let settlement = Settlement(ticket: ticket, id: id, user: owner, reply: .denied(.user))
        guard case .settle(_, .denied(.user))? = value.handle(.answered(settlement), at: moment).first else {
            Issue.record("a refusal is settled as it is"); return
        }
        let actions = value.handle(.settled(settlement, .location(sealed: "c2VhbGVk"), .success(.settled)), at: moment)
        #expect(actions.contains { if case .rememberSealed(id, "c2VhbGVk") = $0 { true } else { false } }, "\(actions)")
        #expect(actions.contains { if case .waiters(.complete(id, .answered)) = $0 { true } else { false } })
        #expect(sent(to: phone, actions) == [#"{"type":"cancel","id":"\#(UUIDText.lowercase(id))"}"#], "the prompt ends")
        guard case .settleDone(ticket, .success(.settled))? = actions.last else { Issue.record("the caller's: \(actions)"); return }

        var failing = instance(with: phone)
        _ = failing.handle(.waiters(.called(id, waiter())), at: moment)
        _ = failing.handle(.waiters(.opened(id, .success(opened()))), at: moment)
        guard case .settle(let kept, .localLocation)? = socketAnswer(phone, &failing).last else { Issue.record("kept"); return }
        let failed = failing.handle(.settled(kept, .localLocation, .failure(SettleTestError.down)), at: moment)
        #expect(!failed.contains { if case .waiters(.complete) = $0 { true } else { false } }, "the call waits on: \(failed)")
        #expect(failing.phones.held[id] != nil, "the socket's answer is held for the resync")
        #expect(failing.waiters.waiters[id]?.settlingFix != nil, "the kept fix stays: whether it committed, the resync reads")
        // It had committed (only its result was lost): the resync hands the fix over, since
        // it was never sealed for a replay.
        let row = RelayRows.RequestState(id: id, settled: true, outcome: .location, reason: nil, delivered: true)
        let resynced = failing.handle(.waiters(.states([row], asked: [id])), at: moment)
        #expect(resynced.contains { if case .waiters(.complete(id, .answered(_, kept.fix))) = $0 { true } else { false } },
                "\(resynced)")
    }

    /// A settle that lost (another answer won) drops the kept fix: a later resync that
    /// finds the row settled with a location asks the sealer for it, and never hands over
    /// the fix that lost.
    @Test func aLostSettleDropsTheKeptFix() throws {
        let phone = Phone(user: owner)
        var value = instance(with: phone)
        _ = value.handle(.waiters(.called(id, waiter())), at: moment)
        _ = value.handle(.waiters(.opened(id, .success(opened()))), at: moment)
        guard case .settle(let kept, .localLocation)? = socketAnswer(phone, &value).last else { Issue.record("kept"); return }
        let lost = value.handle(.settled(kept, .localLocation, .success(.gone)), at: moment)
        #expect(!lost.contains { if case .waiters(.complete) = $0 { true } else { false } }, "\(lost)")
        let row = RelayRows.RequestState(id: id, settled: true, outcome: .location, reason: nil, delivered: true)
        let actions = value.handle(.waiters(.states([row], asked: [id])), at: moment)
        guard case .waiters(.requestReplay([id]))? = actions.last else { Issue.record("replayed: \(actions)"); return }
        #expect(!actions.contains { if case .waiters(.complete) = $0 { true } else { false } })
    }

    /// A task's open (nobody waits here) as events: the open is asked for, and its result
    /// pings the phones here, starts the pushes and completes the call as waiting — or,
    /// refused (quiet hours, the cap), completes it at once and asks nobody.
    @Test func aDurableOpenIsAnEventAndItsResult() throws {
        let phone = Phone(user: owner)
        var value = instance(with: phone, pushes: PushTiming())
        let task = waiter(resumable: true)
        guard case .openDurable(id, _)? = value.handle(.durableCalled(id, task), at: moment).first else {
            Issue.record("opened"); return
        }
        let actions = value.handle(.durableOpened(id, task, .success(opened())), at: moment)
        #expect(sent(to: phone, actions).count == 1, "pinged: \(actions)")
        #expect(actions.contains { if case .push(id, .arm(.wake, _)) = $0 { true } else { false } })
        guard case .waiters(.complete(id, .outcome(.waiting)))? = actions.last else { Issue.record("waiting: \(actions)"); return }

        var quiet = instance(with: phone, pushes: PushTiming())
        let refused = quiet.handle(.durableOpened(id, task, .success(.init(status: .tooMany, connections: 1, ping: opened().ping))),
                                   at: moment)
        #expect(sent(to: phone, refused).isEmpty && quiet.pushes.isEmpty, "a refused request reaches no phone: \(refused)")
        guard case .waiters(.complete(id, .outcome(.failure(.tooManyWaiting))))? = refused.last else {
            Issue.record("refused: \(refused)"); return
        }
    }

    /// A refused request never reaches a phone, whoever asked: the ping goes out only in the
    /// event that saw the open succeed, so quiet hours, the caps and a failed open (a revoked
    /// credential, the database away) answer the agent and leave the phones and the pushes
    /// untouched — for a call waiting here and for a task alike.
    @Test func aRefusedRequestNeverReachesAPhone() throws {
        let phone = Phone(user: owner)
        let quiet = RelayRows.QuietHours(name: "Ada", until: now.addingTimeInterval(3600), local: "07:00")
        let refusals: [Result<RelayRows.Opened, any Error>] = [
            .success(.init(status: .quiet, connections: 1, ping: nil, quiet: quiet)),
            .success(.init(status: .tooMany, connections: 1, ping: nil)),
            .success(.init(status: .full, connections: 1, ping: nil)),
            .failure(SettleTestError.down),
        ]
        for refusal in refusals {
            var call = instance(with: phone, pushes: PushTiming())
            let called = call.handle(.waiters(.called(id, waiter())), at: moment)
            #expect(sent(to: phone, called).isEmpty, "nothing is sent before the open's result")
            let refused = call.handle(.waiters(.opened(id, refusal)), at: moment)
            #expect(sent(to: phone, refused).isEmpty && call.pushes.isEmpty && !call.phones.pings.contains(id), "\(refused)")
            #expect(refused.contains { if case .waiters(.complete(id, _)) = $0 { true } else { false } }, "the agent is answered")

            var task = instance(with: phone, pushes: PushTiming())
            let asked = task.handle(.durableCalled(id, waiter(resumable: true)), at: moment)
            #expect(sent(to: phone, asked).isEmpty, "nothing is sent before the open's result")
            let taskRefused = task.handle(.durableOpened(id, waiter(resumable: true), refusal), at: moment)
            #expect(sent(to: phone, taskRefused).isEmpty && task.pushes.isEmpty && !task.phones.pings.contains(id))
        }
    }

    /// The phones' resync as the value's event (the driver no longer reads the phones'
    /// actions itself): it asks for the re-registrations one call after the other
    /// (`registerHellos(_, batched: false)`, which the resync's task awaits) and settles a
    /// held answer again through its settlement — the database took none of it the first time.
    @Test func thePhonesResyncReregistersAndSettlesHeldAnswersAgain() throws {
        let phone = Phone(user: owner)
        var value = instance(with: phone)
        let elsewhere = UUID()
        let reply = PhoneMessage.PhoneReply.denied(.user)
        guard case .settle(let first, .denied(.user))? = value.handle(.phones(.received(phone, .answer(id: elsewhere, reply))),
                                                                     at: moment).last else {
            Issue.record("settled"); return
        }
        _ = value.handle(.settled(first, .denied(reason: .user), .failure(SettleTestError.down)), at: moment)
        #expect(value.phones.held[elsewhere] != nil, "held for the resync")
        let resync = value.handle(.phones(.resync(reregister: true, maximumBatch: 100)), at: moment)
        #expect(resync.contains { if case .phones(.registerHellos(_, batched: false)) = $0 { true } else { false } }, "\(resync)")
        guard case .settle(let again, .denied(.user))? = resync.last, case .socket(let held) = again.origin, held.id == elsewhere else {
            Issue.record("the held answer is settled again: \(resync)"); return
        }
        let settled = value.handle(.settled(again, .denied(reason: .user), .success(.gone)), at: moment)
        #expect(!settled.contains { if case .settle = $0 { true } else { false } })
    }

    /// A resync's re-creation of a row lost in a crash, as events: the re-open is asked for,
    /// and its result pings the phones here and is counted; a failed one is reported.
    @Test func aRowLostInACrashIsOpenedAgain() throws {
        let phone = Phone(user: owner)
        var value = instance(with: phone)
        _ = value.handle(.waiters(.called(id, waiter())), at: moment)
        // First opened while the phone here was not yet the owner's (no ping for it).
        _ = value.handle(.waiters(.opened(id, .success(.init(status: .opened, connections: 0, ping: nil)))), at: moment)
        guard case .waiters(.open(id, again: true))? = value.handle(.waiters(.states([], asked: [id])), at: moment).last else {
            Issue.record("opened again"); return
        }
        let reopened = value.handle(.waiters(.reopened(id, .success(opened()))), at: moment)
        #expect(reopened.contains { if case .waiters(.recreated(id)) = $0 { true } else { false } }, "\(reopened)")
        #expect(sent(to: phone, reopened).count == 1, "pinged again")
        guard case .waiters(.reopenFailed(id, _))? = value.handle(.waiters(.reopened(id, .failure(SettleTestError.down))),
                                                                   at: moment).first else {
            Issue.record("reported"); return
        }
        let past = Moment(instant: start + .seconds(31), date: now.addingTimeInterval(31))
        #expect(!value.handle(.waiters(.states([], asked: [id])), at: past)
                    .contains { if case .waiters(.open) = $0 { true } else { false } }, "past its deadline: not again")
    }

    /// A call that opened its request starts the request's push plan in the same event (its
    /// wake timer is armed for the driver), a claimed stage is sent with its stage, and the
    /// answer stops the plan in the event that completes the call: no push actor between.
    /// A request opened for nobody waiting here (a task) starts its plan by its own event.
    @Test func theRequestsPushesStartAndStopWithItsCall() throws {
        let timing = PushTiming()
        var value = instance(with: Phone(user: owner), pushes: timing)
        _ = value.handle(.waiters(.called(id, waiter())), at: moment)
        let opened = value.handle(.waiters(.opened(id, .success(opened()))), at: moment)
        #expect(opened.contains { action in
            if case .push(id, .arm(.wake, let at)) = action { at == now.addingTimeInterval(timing.wakeDelay) } else { false }
        }, "\(opened)")
        #expect(!opened.contains { if case .waiters(.pushesOpened) = $0 { true } else { false } }, "no push left to route")
        let later = now.addingTimeInterval(timing.wakeDelay)
        let atLater = Moment(instant: start, date: later)
        guard case .push(id, .claim(.wake))? = value.handle(.pushTimerFired(id, .wake), at: atLater).first
        else { Issue.record("claims the wake"); return }
        let sent = value.handle(.pushClaimed(id, .wake, .claimed(.silent)), at: atLater)
        guard case .pushSend(id, .silent, stage: .wake)? = sent.first else { Issue.record("sends the wake: \(sent)"); return }
        #expect(value.pushes[id] != nil, "a silent wake arms the checking alert")
        let answer = AnswerNotification(id: id, waiter: "here", outcome: .denied, reason: "user", sealed: nil)
        let answered = value.handle(.waiters(.answer(answer, fix: nil)), at: atLater)
        #expect(answered.contains { if case .push(id, .done) = $0 { true } else { false } }, "\(answered)")
        #expect(value.pushes.isEmpty, "the plan is forgotten")

        let task = UUID()
        let durable = value.handle(.durableOpened(task, waiter(resumable: true), .success(.init(status: .opened, connections: 0, ping: nil))),
                                   at: moment)
        #expect(durable.contains { if case .push(task, .arm(.wake, at: now)) = $0 { true } else { false } },
                "a task's plan: no phone connected, the wake at once: \(durable)")
        #expect(instance(with: Phone(user: owner)).pushes.isEmpty)
        var withoutPushes = instance(with: Phone(user: owner))
        #expect(!withoutPushes.handle(.durableOpened(task, waiter(resumable: true), .success(.init(status: .opened, connections: 0, ping: nil))),
                                      at: moment).contains { if case .push = $0 { true } else { false } },
                "an instance without a sender plans no pushes")
    }
}

private enum SettleTestError: Error {
    case down
}
