import Foundation
import HTTPServer
import Lifecycle
import RelayCore

/// The one executor of an instance (docs/architecture.md, "One instance"): it holds the
/// instance's one value, `Instance` (the phones' sockets, pings, held answers and batched calls, and the agents'
/// calls waiting here), hands it every event and performs the actions it returns, in one
/// place (`InstanceDriver+Perform.swift`: one `handle` → actions → perform, no other path).
/// The driver only does I/O: it sends and closes sockets, calls the database, seals, arms
/// timers and resumes the agents' calls, and reports each result as the next event; it
/// keeps only what a value cannot hold (continuations, timer handles, tasks), in named
/// parts (`PushRuns`, `PollWatchers`).
///
/// A request opened here reaches the phones here, and a phone's answer here reaches the
/// call waiting here, as transitions of that one value: the ping of a new request goes out
/// in the event that opened it, and a fix answered on this instance is kept by its call and
/// handed over without being sealed (`Instance+Settle.swift` decides, `+Settle` performs).
///
/// The parts: `+Perform` (events in, actions out), `+Phones` (socket events, notifications
/// for phones, the phones' resync and drain), `+Locate` (the agents' calls), `+Durable`
/// (polls and cancels of durable requests), `+Settle` (a phone's answer, from its socket or
/// `POST /v1/device/answer`).
public actor InstanceDriver {
    typealias Value = Instance
    typealias State = InstanceState

    // MARK: Phones

    /// How long a socket may stay without saying hello.
    static let helloTimeout: TimeInterval = 10
    /// Hellos per `relay.device_hellos` call from sockets (re-registration sends the most
    /// the function takes). Hellos go at once when a call slot is free; those arriving while
    /// calls run go together when one returns (a storm's batches form by themselves).
    static let helloBatch = 250
    /// How long closed sockets are collected before they are forgotten together.
    static let disconnectWindow: Duration = .milliseconds(50)
    /// How long sent pings wait before they are marked delivered together: most are
    /// answered sooner (and settling marks them), and only the 503/504 choice at a deadline
    /// (seconds later) reads the mark.
    static let deliveredMarkDelay: Duration = .milliseconds(200)

    // MARK: Waiters

    /// Time after `expires_ms` the waiter still waits for the phone's own answer.
    public static let defaultGrace: Duration = .seconds(2)
    /// Requests that may wait for one user's phones at once (the 429 cap).
    public static let defaultMaxWaiting = 5
    /// The owner's cap for tasks and async requests (each credential has its own cap of 20);
    /// a get_phone_location call keeps the owner's cap of synchronous requests.
    static let maxWaitingDurable = 100
    /// The cap for tasks and async requests made through a share: a viewer's agents keep at
    /// most this many prompts waiting on the owner's phone (and across every owner who
    /// shares with the viewer), so they can never bury the owner's own agents' requests.
    static let maxWaitingDurableShared = 5

    let instance: String
    let database: RelayDatabase
    let logger: Logger
    let timers: RelayTimers
    /// The instance's clock (its loop's): every event's moment, and the times it sends.
    let clock: RelayClock
    /// Where the sockets' events and the database calls' results are handled (the loop
    /// that owns the sockets), if any.
    nonisolated let executor: (any TaskExecutor)?
    let authenticator: Authenticator
    /// Answers a phone's requests about its own account (the sockets' and, for a reminder's
    /// Keep or Remove, `POST /v1/device/answer`'s).
    nonisolated let account: PhoneAccount
    /// Sealed fixes this instance settled, for a waiter elsewhere that missed them.
    let sealedAnswers: SealedAnswerMemory
    /// Claims and sends the pushes the value plans; nil in tests without pushes.
    let pushes: PushSender?
    let grace: Duration
    let maxWaiting: Int

    /// The instance: its phones (every socket here, its pings and held answers), the calls
    /// waiting here and the push plans of the requests it opened, and every decision about
    /// them (changed only by `handle(_:)`).
    var value: Value
    /// The actions of the event being handled (reused: see `handle(_:)`).
    var scratch: [Value.Action] = []
    /// Each time a hello found this instance's row gone (reaped, or lost in a crash): whoever
    /// keeps the instance's row (its maintenance) beats now, which re-creates it, and
    /// re-registers. At most one request waits (a storm of refused hellos asks once anyway).
    nonisolated let reregistrationRequests: AsyncStream<Void>
    nonisolated let reregistrationInput: AsyncStream<Void>.Continuation
    /// The calls in tasks of their own (hellos, disconnects, delivered marks, a browser
    /// phone's lists, a waiting call's database steps, push claims and sends), each counted
    /// until it ends; `finish()` waits for them, and none starts after it.
    nonisolated let background = OwnedTasks()
    /// Sockets whose messages sent while their hello was in the database are being handled
    /// by the hello's task, and the socket events waiting for that to end: a socket's
    /// messages are handled in the order it sent them (docs/protocol.md, "The socket"),
    /// also across its registration (else a key list asked for before the hello can be
    /// answered after a key created after it, and empty the page's list).
    var replaying: [UUID: [CheckedContinuation<Void, Never>]] = [:]

    /// What each waiting call needs that is not a decision: its request (to open it), its
    /// reply key (to open a sealed fix) and its continuation.
    var calls: [UUID: Call] = [:]
    /// Each waiting call's one timer (its current wait).
    var waitTimers: [UUID: RelayTimers.Handle] = [:]
    /// The timers, claims and sends of the pushes of the requests opened here.
    var pushRuns = PushRuns()
    /// Polls of durable requests waiting here for an answer, and those reading a row now.
    var polls = PollWatchers()
    /// How often each socket and account here may ask its account for something.
    var settingsBudget = SettingsBudget()
    /// The statuses of settles without a socket, until their caller takes them (within the
    /// event that settled them).
    var settlements: [UUID: Result<RelayStatus.Settle, any Error>] = [:]
    /// What the resync under way found: rows re-created, and what failed.
    var resyncTally = ResyncTally()
    /// Who waits for no call to wait here (a drain), each with the timer of its deadline.
    var idleWaiters: [UUID: (continuation: CheckedContinuation<Void, Never>, deadline: RelayTimers.Handle)] = [:]

    /// What a resync found while its event's steps ran.
    struct ResyncTally {
        /// Rows lost in a crash and re-created.
        var recreated = 0
        /// The first re-creation that failed.
        var failure: (any Error)?
        /// Whether the database took the re-registrations so far.
        var reachable = true
        /// Settles of phones' answers the database did not take.
        var settleFailures = 0
    }

    /// A waiting call's request, reply key and continuation.
    struct Call {
        let request: LocateRequest
        let replyKey: ReplyKey
        /// Set once the call waits.
        var continuation: CheckedContinuation<LocateOutcome, any Error>?
        /// How it ended, when that came before it waited.
        var completion: WaiterState.Completion?
    }

    /// Creates the driver of relay instance `instance`.
    init(instance: String, database: RelayDatabase, authenticator: Authenticator, logger: Logger,
         pushes: PushSender? = nil, sealedAnswers: SealedAnswerMemory = SealedAnswerMemory(),
         grace: Duration = InstanceDriver.defaultGrace, maxWaiting: Int = InstanceDriver.defaultMaxWaiting,
         pushOrigins: [String] = [], executor: (any TaskExecutor)? = nil, timers: RelayTimers = RelayTimers(loop: nil)) {
        self.instance = instance
        self.database = database
        self.authenticator = authenticator
        self.logger = logger
        self.pushes = pushes
        self.sealedAnswers = sealedAnswers
        self.grace = grace
        self.maxWaiting = maxWaiting
        self.executor = executor
        self.timers = timers
        self.clock = RelayClock(loop: timers.loop)
        self.account = PhoneAccount(database: database, extraOrigins: pushOrigins, logger: logger)
        self.value = Value(phones: State(helloBatch: Self.helloBatch, disconnectWindow: Self.disconnectWindow,
                                         maximumDisconnects: RelayDatabase.maxDisconnectsPerBatch,
                                         deliveredMarkDelay: Self.deliveredMarkDelay, maximumDelivered: RelayDatabase.maxDelivered),
                           waiters: WaiterState(grace: grace), pushTiming: pushes?.timing)
        (reregistrationRequests, reregistrationInput) = AsyncStream.makeStream(bufferingPolicy: .bufferingNewest(1))
    }

    /// Sockets that have not said hello yet, per account and relay-wide.
    nonisolated let waitingRoom = HelloWaitingRoom()

    /// Phones connected here (after hello).
    var connectedCount: Int { value.phones.registeredCount }

    /// Answers waiting for the database (for /metrics).
    var heldCount: Int { value.phones.held.count }

    /// Requests waiting here now (for /metrics, resync and drain).
    var waitingCount: Int { value.waiters.count }

    // MARK: Shutdown

    /// The last step before the database pool shuts down: no call in a task of its own
    /// starts from now on (a batch window that ends later, a socket's late close, a push
    /// timer), and this returns when those already running have ended.
    func finish() async {
        await background.finish()
    }

    /// The step before the push transport stops: no push claim or send starts from now on,
    /// and this returns when the sends under way have ended (a claimed stage is sent, not
    /// cut off: it was claimed exactly once, across instances).
    func finishPushes() async {
        for send in pushRuns.finish() { await send.value }
    }
}
