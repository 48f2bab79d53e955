import Foundation

/// Everything one relay instance knows, as one value driven by events: its phones
/// (`InstanceState`: sockets, pings, held answers, batched calls), the agents' calls
/// waiting on it (`WaiterState`) and the push plans of the requests it opened (`PushPlan`,
/// docs/protocol.md, "Who sends: the claim": this instance is their only sender). One
/// `Event` vocabulary goes in and one `Action` vocabulary comes out; `InstanceDriver`
/// performs the actions, in one place, and keeps only what a value cannot hold
/// (continuations, timer handles, I/O).
///
/// What crosses between the two sides is a transition of this value, not a hop between
/// executors:
/// - a request opened here pings the owner's phones here in the same event (the waiters'
///   `ping` becomes the phones' `locate`), unless its call ended in that event;
/// - a fix a phone here answers for a call waiting here is kept by the call while it is
///   settled (`settling` → `keptHere`), so it never needs sealing;
/// - an answer settled here reaches the call waiting here, and the phones that got the
///   ping are told it ended (`settledHere`);
/// - a call that opened its request starts the request's push plan, and its answer (or its
///   end) stops it, in the same event (the waiters' `pushesOpened` / `pushesSettled`).
///
/// Each side stays testable alone (`InstanceStateTests`, `WaiterStateTests` drive the
/// parts); `InstanceTests` drive what crosses.
package struct Instance {
    /// The phones connected here and every decision about them.
    package internal(set) var phones: InstanceState
    /// The calls waiting here and every decision about them.
    package internal(set) var waiters: WaiterState
    /// The push plan of each request opened here that may still push.
    package internal(set) var pushes: [UUID: PushPlan] = [:]
    /// The pushes' delays; nil when the instance sends no pushes.
    private let pushTiming: PushTiming?
    /// Reused buffers for the parts' actions (no array is made per event).
    private var phoneActions: [InstanceState.Action] = []
    private var waiterActions: [WaiterState.Action] = []

    /// What happened.
    package enum Event {
        /// On a socket, on the bus for phones, on a phones' timer, or a phones' database result.
        case phones(InstanceState.Event)
        /// A call, its database results, its timers, its hang-up, or an answer for it.
        case waiters(WaiterState.Event)
        /// A phone here answered request `id` with `fix` and its settle is about to run.
        case settling(UUID, LocationFix)
        /// That settle did not win (another answer did): the kept fix is dropped.
        case settledElsewhere(UUID)
        /// This instance settled `answer` (with the fix it carries when answered here):
        /// the call waiting here takes it, and with `cancelPings` (an answer without a
        /// socket, `POST /v1/device/answer`) the phones here that got the ping are told it
        /// ended — a socket's settle does that in the phones' own `settled` event.
        case settledHere(AnswerNotification, fix: LocationFix?, cancelPings: Bool)
        /// A request opened here that nobody waits for here (a task, an async request):
        /// its push plan starts with `connections` sockets of its owner live.
        case pushesOpened(UUID, connections: Int, expires: Date)
        /// A push timer fired, or a push claim came back.
        case push(UUID, PushPlan.Event)
    }

    /// What to do, in order.
    package enum Action {
        /// A phones' action (send, close, call the database, arm a window).
        case phones(InstanceState.Action)
        /// A waiters' action (open, arm a wait, finish, complete a call).
        case waiters(WaiterState.Action)
        /// A push plan's action: arm its timer, claim a stage, or forget the request's
        /// pushes (`done`); never `send`, which comes as `pushSend`.
        case push(UUID, PushPlan.Action)
        /// Send the claimed push of `kind` for `stage`.
        case pushSend(UUID, PushPlan.Kind, stage: PushPlan.Stage)
    }

    /// An instance with the phones' batch windows, the waiters' grace and the pushes'
    /// delays (nil: no pushes).
    package init(phones: InstanceState, waiters: WaiterState, pushTiming: PushTiming? = nil) {
        self.phones = phones
        self.waiters = waiters
        self.pushTiming = pushTiming
    }

    /// Handles one event at `now` (`instant` on the continuous clock), appending the
    /// actions to perform, in order, to `actions`.
    package mutating func handle(_ event: Event, now: Date, instant: ContinuousClock.Instant, into actions: inout [Action]) {
        switch event {
        case .phones(let event):
            phonesHandle(event, now: now, into: &actions)
        case .waiters(let event):
            waitersHandle(event, now: now, instant: instant, into: &actions)
        case .settling(let id, let fix):
            waitersHandle(.settling(id, fix), now: now, instant: instant, into: &actions)
        case .settledElsewhere(let id):
            waitersHandle(.settledElsewhere(id), now: now, instant: instant, into: &actions)
        case .settledHere(let answer, let fix, let cancelPings):
            waitersHandle(.answer(answer, fix: fix), now: now, instant: instant, into: &actions)
            if cancelPings { phonesHandle(.cancel(answer.id), now: now, into: &actions) }
        case .pushesOpened(let id, let connections, let expires):
            pushesOpened(id, connections: connections, expires: expires, now: now, into: &actions)
        case .push(let id, let event):
            pushHandle(id, event, into: &actions)
        }
    }

    /// Handles one event and returns its actions (for a caller that performs some of them
    /// itself — a call's first steps, a resync — and for tests).
    package mutating func handle(_ event: Event, now: Date = Date(), instant: ContinuousClock.Instant = .now) -> [Action] {
        var actions: [Action] = []
        handle(event, now: now, instant: instant, into: &actions)
        return actions
    }

    private mutating func phonesHandle(_ event: InstanceState.Event, now: Date, into actions: inout [Action]) {
        phones.handle(event, now: now, into: &phoneActions)
        for action in phoneActions { actions.append(.phones(action)) }
        clear(&phoneActions)
    }

    private mutating func waitersHandle(_ event: WaiterState.Event, now: Date, instant: ContinuousClock.Instant,
                                        into actions: inout [Action]) {
        waiters.handle(event, now: instant, into: &waiterActions)
        for action in waiterActions {
            switch action {
            case .ping(let id, let ping, let owner):
                // The phones here, in place. A call that ended in this same event (its answer
                // came while it opened) pings nobody: its request is settled already.
                guard waiters.waiters[id] != nil else { continue }
                phonesHandle(.locate(ping, owner: owner), now: now, into: &actions)
            case .pushesOpened(let id, let connections, let expires):
                pushesOpened(id, connections: connections, expires: expires, now: now, into: &actions)
            case .pushesSettled(let id):
                pushHandle(id, .answered, into: &actions)
            default:
                actions.append(.waiters(action))
            }
        }
        clear(&waiterActions)
    }

    /// A request opened here starts its push plan (once).
    private mutating func pushesOpened(_ id: UUID, connections: Int, expires: Date, now: Date,
                                       into actions: inout [Action]) {
        guard let pushTiming, pushes[id] == nil else { return }
        pushes[id] = PushPlan(expires: expires, timing: pushTiming)
        pushHandle(id, .opened(connections: connections, now: now), into: &actions)
    }

    /// One event of a request's push plan; a plan that is done is forgotten.
    private mutating func pushHandle(_ id: UUID, _ event: PushPlan.Event, into actions: inout [Action]) {
        guard var plan = pushes[id] else { return }
        let planned = plan.handle(event)
        pushes[id] = plan
        for action in planned {
            switch action {
            case .send(let kind):
                // The stage is the one just claimed: the latest the plan marks sent.
                actions.append(.pushSend(id, kind, stage: plan.realertSent ? .realert : plan.checkingSent ? .checking : .wake))
            case .done:
                pushes[id] = nil
                actions.append(.push(id, action))
            case .arm, .claim:
                actions.append(.push(id, action))
            }
        }
    }

    /// Empties a reused buffer, keeping its storage unless a burst (a resync, a drain) grew it.
    private func clear<T>(_ buffer: inout [T]) {
        if buffer.capacity > 64 { buffer = [] } else { buffer.removeAll(keepingCapacity: true) }
    }
}
