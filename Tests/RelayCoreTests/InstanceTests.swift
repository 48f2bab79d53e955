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
    let fix = LocationFix(latitude: 1, longitude: 2, accuracyM: 3, timestampMs: 4, deviceName: "Here", platform: "ios")

    /// An instance with one registered phone of the owner (and push plans with `pushes`).
    func instance(with phone: Phone, pushes: PushTiming? = nil) -> Value {
        var value = Value(phones: InstanceState(helloBatch: 250, disconnectWindow: .milliseconds(50), maximumDisconnects: 1000,
                                                deliveredMarkDelay: .milliseconds(200), maximumDelivered: 1000),
                          waiters: WaiterState(grace: .seconds(2)), pushTiming: pushes)
        _ = value.handle(.phones(.opened(phone)), now: now, instant: start)
        let batch = value.handle(.phones(.received(phone, .hello(deviceID: UUID(), name: "Ada's phone", platform: "ios",
                                                                  appVersion: "1"))), now: now, instant: start)
            .compactMap { action -> [InstanceState.Hello]? in
                if case .phones(.registerHellos(let batch, _)) = action { batch } else { nil }
            }
        let hellos = batch.flatMap { $0 }
        _ = value.handle(.phones(.hellosRegistered(hellos, .init(statuses: [phone.connection: .ok], pending: []), batched: true)),
                         now: now, instant: start)
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
        _ = value.handle(.waiters(.called(id, waiter())), now: now, instant: start)
        let actions = value.handle(.waiters(.opened(id, .success(opened()))), now: now, instant: start)
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
        _ = value.handle(.waiters(.called(id, waiter())), now: now, instant: start)
        let answer = AnswerNotification(id: id, waiter: "here", outcome: .denied, reason: "user", sealed: nil)
        _ = value.handle(.waiters(.answer(answer, fix: nil)), now: now, instant: start)
        let actions = value.handle(.waiters(.opened(id, .success(opened()))), now: now, instant: start)
        #expect(sent(to: phone, actions).isEmpty, "\(actions)")
        #expect(actions.contains { if case .waiters(.complete(id, .answered)) = $0 { true } else { false } })
        #expect(!value.phones.pings.contains(id))
    }

    /// A fix answered here for a call waiting here stays with the call (it is never sealed);
    /// the settle's win hands it over and ends the other phones' prompts when it came without
    /// a socket. A resumable call's fix travels sealed (the agent may fetch it elsewhere),
    /// and so does one for a request that does not wait here.
    @Test func aFixAnsweredHereStaysWithTheCallWaitingHere() throws {
        let phone = Phone(user: owner)
        var value = instance(with: phone)
        _ = value.handle(.waiters(.called(id, waiter())), now: now, instant: start)
        _ = value.handle(.waiters(.opened(id, .success(opened()))), now: now, instant: start)
        guard case .waiters(.keptHere(id))? = value.handle(.settling(id, fix), now: now, instant: start).first else {
            Issue.record("kept here"); return
        }
        let answer = AnswerNotification(id: id, waiter: "here", outcome: .location, reason: nil, sealed: nil)
        let actions = value.handle(.settledHere(answer, fix: fix, cancelPings: true), now: now, instant: start)
        let completed = actions.compactMap { action -> LocationFix? in
            if case .waiters(.complete(id, .answered(_, let fix?))) = action { fix } else { nil }
        }
        #expect(completed == [fix], "\(actions)")
        #expect(sent(to: phone, actions) == [#"{"type":"cancel","id":"\#(UUIDText.lowercase(id))"}"#], "the prompt ends")
        #expect(value.handle(.settling(UUID(), fix), now: now, instant: start).isEmpty, "not waiting here: sealed")

        var resumable = instance(with: phone)
        _ = resumable.handle(.waiters(.called(id, waiter(resumable: true))), now: now, instant: start)
        _ = resumable.handle(.waiters(.opened(id, .success(opened()))), now: now, instant: start)
        #expect(resumable.handle(.settling(id, fix), now: now, instant: start).isEmpty, "a resumable call's fix is sealed")
    }

    /// A settle that lost (another answer won) drops the kept fix: a later resync that
    /// finds the row settled with a location asks the sealer for it, and never hands over
    /// the fix that lost.
    @Test func aLostSettleDropsTheKeptFix() throws {
        var value = instance(with: Phone(user: owner))
        _ = value.handle(.waiters(.called(id, waiter())), now: now, instant: start)
        _ = value.handle(.waiters(.opened(id, .success(opened()))), now: now, instant: start)
        _ = value.handle(.settling(id, fix), now: now, instant: start)
        #expect(value.handle(.settledElsewhere(id), now: now, instant: start).isEmpty)
        let row = RelayRows.RequestState(id: id, settled: true, outcome: .location, reason: nil, delivered: true)
        let actions = value.handle(.waiters(.states([row], asked: [id], now: now)), now: now, instant: start)
        guard case .waiters(.requestReplay([id]))? = actions.last else { Issue.record("replayed: \(actions)"); return }
        #expect(!actions.contains { if case .waiters(.complete) = $0 { true } else { false } })
    }

    /// A call that opened its request starts the request's push plan in the same event (its
    /// wake timer is armed for the driver), a claimed stage is sent with its stage, and the
    /// answer stops the plan in the event that completes the call: no push actor between.
    /// A request opened for nobody waiting here (a task) starts its plan by its own event.
    @Test func theRequestsPushesStartAndStopWithItsCall() throws {
        let timing = PushTiming()
        var value = instance(with: Phone(user: owner), pushes: timing)
        _ = value.handle(.waiters(.called(id, waiter())), now: now, instant: start)
        let opened = value.handle(.waiters(.opened(id, .success(opened()))), now: now, instant: start)
        #expect(opened.contains { action in
            if case .push(id, .arm(.wake, let at)) = action { at == now.addingTimeInterval(timing.wakeDelay) } else { false }
        }, "\(opened)")
        #expect(!opened.contains { if case .waiters(.pushesOpened) = $0 { true } else { false } }, "no push left to route")
        let later = now.addingTimeInterval(timing.wakeDelay)
        guard case .push(id, .claim(.wake))? = value.handle(.push(id, .timerFired(.wake, now: later)), now: later, instant: start).first
        else { Issue.record("claims the wake"); return }
        let sent = value.handle(.push(id, .claimResult(.wake, .claimed(.silent), now: later)), now: later, instant: start)
        guard case .pushSend(id, .silent, stage: .wake)? = sent.first else { Issue.record("sends the wake: \(sent)"); return }
        #expect(value.pushes[id] != nil, "a silent wake arms the checking alert")
        let answer = AnswerNotification(id: id, waiter: "here", outcome: .denied, reason: "user", sealed: nil)
        let answered = value.handle(.waiters(.answer(answer, fix: nil)), now: later, instant: start)
        #expect(answered.contains { if case .push(id, .done) = $0 { true } else { false } }, "\(answered)")
        #expect(value.pushes.isEmpty, "the plan is forgotten")

        let task = UUID()
        guard case .push(task, .arm(.wake, at: now))? = value.handle(.pushesOpened(task, connections: 0, expires: now.addingTimeInterval(30)),
                                                                  now: now, instant: start).first
        else { Issue.record("a task's plan: no phone connected, the wake at once"); return }
        #expect(instance(with: Phone(user: owner)).pushes.isEmpty)
        var withoutPushes = instance(with: Phone(user: owner))
        #expect(withoutPushes.handle(.pushesOpened(task, connections: 0, expires: now), now: now, instant: start).isEmpty,
                "an instance without a sender plans no pushes")
    }
}
