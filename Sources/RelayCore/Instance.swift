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
/// - a phone's answer becomes its `Settlement` (`Instance+Settle.swift`): a fix for a call
///   waiting here is kept by the call while it is settled, so it never needs sealing;
///   another is sealed first; the settle's result (`settled`) reaches the call waiting
///   here, and the phones that got the ping are told it ended;
/// - a task's open (`durableCalled` → `durableOpened`) pings the phones here and starts
///   its pushes, or is refused and asks nobody;
/// - a call that opened its request starts the request's push plan, and its answer (or its
///   end) stops it, in the same event (the waiters' `pushesOpened` / `pushesSettled`).
///
/// Each side stays testable alone (`InstanceStateTests`, `WaiterStateTests` drive the
/// parts); `InstanceTests` drive what crosses. No clock is read here: each event comes with
/// one reading of the loop's (`Moment`).
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
    var phoneActions: [InstanceState.Action] = []
    var waiterActions: [WaiterState.Action] = []

    /// What happened.
    package enum Event {
        /// On a socket, on the bus for phones, on a phones' timer, or a phones' database result.
        case phones(InstanceState.Event)
        /// A call, its database results, its timers, its hang-up, or an answer for it.
        case waiters(WaiterState.Event)
        /// A task or an async request was asked for (nobody waits here): open it.
        case durableCalled(UUID, WaiterState.Waiter)
        /// Its open came back: its phones here are pinged and its pushes start, or it is
        /// refused; either way its call completes (`waiters(.complete)`).
        case durableOpened(UUID, WaiterState.Waiter, Result<RelayRows.Opened, any Error>)
        /// An answer without a socket (`POST /v1/device/answer`) is to be settled.
        case answered(Settlement)
        /// The reply key a fix is sealed to came back (nil: not a waiting request of the user).
        case replyKey(Settlement, LocationFix, Result<[UInt8]?, any Error>)
        /// A settle came back (`answer` is what was settled; nil when sealing failed first).
        case settled(Settlement, PhoneAnswer?, Result<RelayStatus.Settle, any Error>)
        /// A push timer fired.
        case pushTimerFired(UUID, PushPlan.Stage)
        /// A push claim came back.
        case pushClaimed(UUID, PushPlan.Stage, PushPlan.ClaimResult)
    }

    /// What to do, in order.
    package enum Action {
        /// A phones' action (send, close, call the database, arm a window); never `settle`,
        /// which becomes a settlement's actions.
        case phones(InstanceState.Action)
        /// A waiters' action (open, arm a wait, finish, complete a call).
        case waiters(WaiterState.Action)
        /// Open a durable request, then report `durableOpened`.
        indirect case openDurable(UUID, WaiterState.Waiter)
        /// Ask for the reply key of the settlement's request, then report `replyKey`.
        case fetchReplyKey(Settlement, LocationFix)
        /// Seal `fix` to `key` and settle it; report `settled`.
        indirect case seal(Settlement, LocationFix, key: [UInt8])
        /// Settle `answer`, then report `settled`.
        case settle(Settlement, PhoneAnswer)
        /// Keep a sealed fix settled here for a waiter elsewhere that missed it (a replay).
        case rememberSealed(UUID, String)
        /// The settle of the caller waiting for `ticket` ended so.
        case settleDone(ticket: UUID, Result<RelayStatus.Settle, any Error>)
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

    /// Handles one event at `now` (one reading of the loop's clock), appending the actions
    /// to perform, in order, to `actions`.
    package mutating func handle(_ event: Event, at now: Moment, into actions: inout [Action]) {
        switch event {
        case .phones(let event):
            phonesHandle(event, now: now, into: &actions)
        case .waiters(let event):
            waitersHandle(event, now: now, into: &actions)
        case .durableCalled(let id, let waiter):
            actions.append(.openDurable(id, waiter))
        case .durableOpened(let id, let waiter, let result):
            durableOpened(id, waiter, result, now: now, into: &actions)
        case .answered(let settlement):
            settling(settlement, now: now, into: &actions)
        case .replyKey(let settlement, let fix, let result):
            switch result {
            case .success(let key?): actions.append(.seal(settlement, fix, key: key))
            // Not a waiting request of this user: the settle says which (gone or forbidden),
            // and changes nothing in either case.
            case .success(nil): actions.append(.settle(settlement, .unavailable(reason: .error)))
            case .failure(let error): settled(settlement, nil, .failure(error), now: now, into: &actions)
            }
        case .settled(let settlement, let answer, let result):
            settled(settlement, answer, result, now: now, into: &actions)
        case .pushTimerFired(let id, let stage):
            pushHandle(id, .timerFired(stage, now: now.date), into: &actions)
        case .pushClaimed(let id, let stage, let result):
            pushHandle(id, .claimResult(stage, result, now: now.date), into: &actions)
        }
    }

    /// Handles one event and returns its actions (for tests).
    package mutating func handle(_ event: Event, at now: Moment) -> [Action] {
        var actions: [Action] = []
        handle(event, at: now, into: &actions)
        return actions
    }

    mutating func phonesHandle(_ event: InstanceState.Event, now: Moment, into actions: inout [Action]) {
        phones.handle(event, now: now.date, into: &phoneActions)
        // The buffer is taken while its actions are read (a settlement's decision handles
        // events of the phones too), and given back, emptied, after.
        var taken: [InstanceState.Action] = []
        swap(&taken, &phoneActions)
        for action in taken {
            // A socket's answer (or a resync's held one) becomes its settlement's actions.
            if case .settle(let answer) = action {
                settling(Settlement(answer), now: now, into: &actions)
            } else {
                actions.append(.phones(action))
            }
        }
        clear(&taken)
        phoneActions = taken
    }

    mutating func waitersHandle(_ event: WaiterState.Event, now: Moment, into actions: inout [Action]) {
        waiters.handle(event, now: now.instant, into: &waiterActions)
        var taken: [WaiterState.Action] = []
        swap(&taken, &waiterActions)
        defer {
            clear(&taken)
            waiterActions = taken
        }
        for action in taken {
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
            case .keptHere:
                preconditionFailure("read by the settlement that asked")
            default:
                actions.append(.waiters(action))
            }
        }
    }

    /// A request opened here starts its push plan (once).
    mutating func pushesOpened(_ id: UUID, connections: Int, expires: Date, now: Moment,
                                       into actions: inout [Action]) {
        guard let pushTiming, pushes[id] == nil else { return }
        pushes[id] = PushPlan(expires: expires, timing: pushTiming)
        pushHandle(id, .opened(connections: connections, now: now.date), into: &actions)
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
    func clear<T>(_ buffer: inout [T]) {
        if buffer.capacity > 64 { buffer = [] } else { buffer.removeAll(keepingCapacity: true) }
    }
}
