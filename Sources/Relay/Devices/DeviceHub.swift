import Foundation
import HTTPServer
import PGBus

/// The holder side of the device protocol on one instance, as the executor of its
/// `InstanceState`: every event — a socket's message or close, a notification, a batch
/// window's timer, the result of one of its own database calls — goes through the state,
/// and the hub performs the actions it returns (send, close, call the database, arm a
/// timer). What the hub decides is all in that value; the hub only does I/O.
///
/// Hellos, disconnects and delivered marks of many sockets go to the database as one
/// set-based call each (a reconnect storm costs O(batches)). Nothing a phone said is lost
/// to a database outage: an answer that cannot be settled is held and settled again at
/// every resync until its request expires.
///
/// A socket is only as good as its credential (SPEC §5): its own deadline (its WebSocket's
/// close deadline; no sweep visits every socket) closes it when it said no hello within
/// `helloTimeout` (1008) and when its token expired without a fresh `token` message (4001
/// "token_expired"); `closeRevoked()` at every heartbeat closes sockets whose session was
/// signed out or revoked or whose device was removed (4000).
public actor DeviceHub {
    typealias State = InstanceState<DeviceSession>

    /// Close code for a replaced or revoked device (the app must not reconnect by itself).
    public static let replacedCode: UInt16 = 4000
    /// Close code for an expired or unusable credential (the app signs in again).
    public static let tokenExpiredCode: UInt16 = 4001
    /// Close code for a socket past the user's cap (`RelayDatabase.maxSocketsPerUser`).
    public static let tooManyDevicesCode: UInt16 = 4002
    /// How long a socket may stay without saying hello.
    public static let helloTimeout: TimeInterval = 10
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

    let instance: String
    let database: RelayDatabase
    private let settler: AnswerSettler
    private let authenticator: Authenticator
    let logger: Logger
    private let account: PhoneAccount
    /// Where the sockets' events are handled (the loop that owns the sockets), if any.
    nonisolated let executor: (any TaskExecutor)?
    let timers: RelayTimers
    /// The actions of the event being handled (reused: see `handle(_:)`).
    private var scratch: [State.Action] = []
    private var state = State(helloBatch: helloBatch, disconnectWindow: disconnectWindow,
                              maximumDisconnects: RelayDatabase.maxDisconnectsPerBatch,
                              deliveredMarkDelay: deliveredMarkDelay, maximumDelivered: RelayDatabase.maxDelivered)
    /// Each time a hello found this instance's row gone (reaped, or lost in a crash): whoever
    /// keeps the instance's row (its maintenance) beats now, which re-creates it, and
    /// re-registers. At most one request waits (a storm of refused hellos asks once anyway).
    nonisolated let reregistrationRequests: AsyncStream<Void>
    private nonisolated let reregistrationInput: AsyncStream<Void>.Continuation
    /// The hub's database calls in tasks of their own (hellos, disconnects, delivered marks,
    /// a browser phone's lists) running now, and who waits for there to be none (`finish()`).
    private var callsInFlight = 0
    private var idleWaiters: [CheckedContinuation<Void, Never>] = []
    /// Set by `finish()`: the pool is about to shut down, so no batched call starts.
    private var finished = false
    /// Sockets whose messages sent while their hello was in the database are being handled
    /// by the hello's task, and the socket events waiting for that to end: a socket's
    /// messages are handled in the order it sent them (SPEC §5), also across its
    /// registration (clean-clone run 14 of issue 40: a key list asked for before the hello
    /// was answered after a key created after it, and emptied the page's list).
    private var replaying: [UUID: [CheckedContinuation<Void, Never>]] = [:]

    /// Creates the hub of relay instance `instance`.
    init(instance: String, database: RelayDatabase, settler: AnswerSettler, authenticator: Authenticator, logger: Logger,
         pushOrigins: [String] = [], executor: (any TaskExecutor)? = nil, timers: RelayTimers = RelayTimers(loop: nil)) {
        self.executor = executor
        self.timers = timers
        self.account = PhoneAccount(database: database, extraOrigins: pushOrigins, logger: logger)
        self.instance = instance
        self.database = database
        self.settler = settler
        self.authenticator = authenticator
        self.logger = logger
        (reregistrationRequests, reregistrationInput) = AsyncStream.makeStream(bufferingPolicy: .bufferingNewest(1))
    }

    /// Phones connected here (after hello).
    public var connectedCount: Int { state.registeredCount }

    /// Answers waiting for the database (for /metrics).
    public var heldCount: Int { state.held.count }

    /// Sockets that have not said hello yet, per account and relay-wide.
    nonisolated let waitingRoom = HelloWaitingRoom()

    /// A new socket for a verified phone holding its place in the waiting room (`ticket`),
    /// for `HTTPResponse.webSocket(delegate:)`.
    nonisolated func session(for phone: PhoneIdentity, waiting ticket: HelloWaitingRoom.Ticket) -> DeviceSession {
        return DeviceSession(phone: phone, hub: self, waiting: ticket)
    }

    // MARK: Events

    /// A socket's event, in the socket's order (its next one comes after this returns).
    func handle(_ event: DeviceSession.Event, from session: DeviceSession) async {
        while replaying[session.connection] != nil {
            await withCheckedContinuation { replaying[session.connection]?.append($0) }
        }
        let stateEvent: State.Event
        switch event {
        case .opened:
            stateEvent = .opened(session)
        case .closed:
            // A socket that never said hello costs its address, as a failed credential does.
            if let address = session.leaveWaitingRoom() { await authenticator.recordFailure(client: address) }
            stateEvent = .closed(session.connection)
        case .message(let text):
            guard let message = PhoneMessage.parse(text) else { return }
            if case .hello = message { session.leaveWaitingRoom() }
            stateEvent = .received(session, message)
        }
        await handle(stateEvent)
    }

    /// A new request for `owner` (its notification, or the waiter here): ping every phone
    /// of the owner connected here, and keep it for a hello of theirs still in flight.
    public func locate(_ ping: LocateMessage, owner: UUID) async {
        await handle(.locate(ping, owner: owner))
    }

    /// A request ended (its cancel notification, or an answer settled here): tell every
    /// phone that got the ping.
    public func cancel(request: UUID) async {
        await handle(.cancel(request))
    }

    /// Sends `text` to every phone of `owner` connected here that said hello (a reminder).
    func tell(owner: UUID, _ text: String) async {
        await handle(.tell(text, owner: owner))
    }

    /// A `whereabot_device` notification: close older sockets of a device that said hello
    /// elsewhere (4000 "replaced"), or every socket of a revoked device (4000 "revoked").
    func deviceEvent(device: UUID, event: DeviceEvent, connection: UUID?) async {
        await handle(.device(device, revoked: event == .revoked, except: connection))
    }

    /// Closes this instance's sockets whose session was signed out or revoked, or whose
    /// device was removed (4000 "revoked"); called at every heartbeat.
    func closeRevoked() async throws {
        await handle(.revoked(try await database.revokedConnections(on: instance)))
    }

    /// Catches up with the tables: re-registers every socket when `reregister` (after a
    /// reconnect, or when this instance's row was gone), in calls of up to
    /// `RelayDatabase.maxHellosPerBatch`; sends pings whose notification was missed,
    /// settles held answers, and forgets expired pings.
    public func resync(reregister: Bool) async throws {
        let actions = state.handle(.resync(reregister: reregister, maximumBatch: RelayDatabase.maxHellosPerBatch), now: Date())
        let registrations = actions.compactMap { action -> [State.Hello]? in
            guard case .registerHellos(let batch, batched: false) = action else { return nil }
            return batch
        }
        var reachable = true
        for batch in registrations {
            // After a failed call the rest are reported unreachable too (their sockets not
            // registered yet close "try again"; registered ones are tried at the next beat).
            let result = reachable ? await helloStatuses(batch) : nil
            reachable = result != nil
            await handle(.hellosRegistered(batch, result, batched: false))
        }
        guard reachable else { throw DeviceHubError.reregistrationFailed }
        for (owner, ping) in try await database.pendingLocates(on: instance) { await handle(.locate(ping, owner: owner)) }
        for case .settle(let answer) in actions {
            // `gone` may mean the waiter has not re-created the row after a crash yet: kept
            // until the request expires (a cancel drops it sooner).
            guard let settled = await settle(answer) else { throw DeviceHubError.settleFailed }
            await handle(.settled(answer, settled))
        }
    }

    /// Drain: forgets every socket of this instance in one call, then closes them 1012
    /// "restart" (the phones reconnect to another instance); sockets opening from now on
    /// are closed too.
    public func closeAll() async {
        do { try await database.drainConnections(on: instance) } catch {
            logger.failure("drain_connections_failed", error)  // each socket's close forgets it then
        }
        await handle(.drain)
    }

    /// The last step before the database pool shuts down: no call in a task of its own
    /// starts from now on (a batch window that ends later, a socket's late close), and this
    /// returns when those already running have ended.
    func finish() async {
        finished = true
        while callsInFlight > 0 { await withCheckedContinuation { idleWaiters.append($0) } }
    }

    /// A call in a task of its own may start (false once finished); counted until `callEnded()`.
    private func callStarting() -> Bool {
        guard !finished else { return false }
        callsInFlight += 1
        return true
    }

    private func callEnded() {
        callsInFlight -= 1
        guard callsInFlight == 0 else { return }
        for waiter in idleWaiters { waiter.resume() }
        idleWaiters = []
    }

    // MARK: Actions

    /// Handles `event` and performs its actions in order. Those that need no waiting (most
    /// events have only such) are performed from `scratch` in place; from the first that is
    /// awaited on, the rest are taken out and performed by `perform`.
    private func handle(_ event: State.Event) async {
        state.handle(event, now: Date(), into: &scratch)
        var next = 0
        while next < scratch.count, performNow(scratch[next]) { next += 1 }
        let rest = next < scratch.count ? Array(scratch[next...]) : []
        // The buffer keeps its storage between events, unless a burst (a drain, a resync) grew it.
        if scratch.capacity > 64 { scratch = [] } else { scratch.removeAll(keepingCapacity: true) }
        guard !rest.isEmpty else { return }
        guard case .hellosRegistered = event else {
            await perform(rest)
            return
        }
        // The sockets' queued messages are handled here, not by their own events: each
        // socket's next event waits until they are (see `replaying`).
        let sockets = Set(rest.compactMap(\.socket))
        for connection in sockets where replaying[connection] == nil { replaying[connection] = [] }
        await perform(rest)
        for connection in sockets {
            for waiter in replaying.removeValue(forKey: connection) ?? [] { waiter.resume() }
        }
    }

    /// Performs actions in order. What a socket asked for (an account request, a token
    /// check, a settle) is awaited, so the socket's next message comes after it; batched
    /// calls run in tasks of their own and report back as events.
    private func perform(_ actions: [State.Action]) async {
        for action in actions where !performNow(action) {
            switch action {
            case .settle(let answer):
                await handle(.settled(answer, await settle(answer)))
            case .checkToken(let session, let token):
                await handle(.tokenChecked(session, await check(token, of: session)))
            case .account(let session, let device, let request):
                session.send(await account.handle(request, user: session.user, device: device))
            case .forgetSession(let id):
                await authenticator.forgetSession(id)
            default:
                preconditionFailure("performed by performNow")
            }
        }
    }

    /// Performs `action` when it needs no waiting; false (nothing done) when it must be awaited.
    private func performNow(_ action: State.Action) -> Bool {
        switch action {
        case .send(let session, let text):
            session.send(text)
        case .close(let session, let code, let reason):
            session.close(code: code, reason: reason)
        case .registerHellos(let batch, let batched):
            guard callStarting() else { break }
            // Owner: the hub (`finish()` waits for it); the result comes back as the event
            // `hellosRegistered`.
            Task(executorPreference: executor) {
                await Logger.untraced {
                    let result = await self.helloStatuses(batch)
                    await self.handle(.hellosRegistered(batch, result, batched: batched))
                    await self.callEnded()
                }
            }
        case .disconnect(let batch):
            call(.disconnects, "device_disconnect_failed", batch.count) { try await $0.deviceDisconnects(batch) }
        case .markDelivered(let batch):
            call(.deliveredMarks, "mark_delivered_failed", batch.count) { try await $0.markDelivered(batch) }
        case .armWindow(let call, let delay):
            _ = timers.after(delay) { await self.handle(.windowEnded(call)) }
        case .sendAlwaysAllowed(let session):
            guard callStarting() else { break }
            let account = self.account
            // Owner: the hub (`finish()` waits for it); a socket closed meanwhile drops the send.
            Task(executorPreference: executor) {
                for list in await account.lists(user: session.user) ?? [] { session.send(list) }
                await self.callEnded()
            }
        case .renewCredential(let session, let expiry):
            session.renewCredential(until: expiry)
        case .requestReregistration:
            reregistrationInput.yield()
        case .info(let event, let connection):
            logger.info(event, ["connection": connection.uuidString])
        case .warn(let event, let connection):
            logger.warning(event, ["connection": connection.uuidString])
        case .settle, .checkToken, .account, .forgetSession:
            return false
        }
        return true
    }

    /// One disconnects or delivered-marks call in a task of its own; its end is an event.
    private func call(_ call: State.Call, _ failure: String, _ count: Int,
                      _ body: @escaping @Sendable (RelayDatabase) async throws -> Void) {
        guard callStarting() else { return }
        let database = self.database, logger = self.logger
        // Owner: the hub (`finish()` waits for it); its end is the event `batchSent`, which
        // lets the next batch go.
        Task(executorPreference: executor) {
            await Logger.untraced {
                do { try await body(database) } catch { logger.failure(failure, error, ["count": String(count)]) }
                await self.handle(.batchSent(call))
                await self.callEnded()
            }
        }
    }

    /// Seals and settles a phone's answer; nil when the database could not be reached.
    private func settle(_ answer: State.Answer) async -> RelayStatus.Settle? {
        let record = answer.record
        do {
            return try await settler.settle(id: answer.id, user: record.handle.user, device: record.device,
                                            deviceName: record.name, platform: record.platform.text, reply: answer.reply,
                                            replyKey: answer.replyKey)
        } catch {
            logger.failure("answer_held", error, ["request": answer.id.uuidString])
            return nil
        }
    }

    /// A `token` message: a fresh access token for the same user and session, without
    /// client_id, keeps the socket open past the old token's expiry; anything else closes
    /// it 4001 "token_expired".
    private func check(_ token: String, of session: DeviceSession) async -> State.TokenCheck {
        do {
            let fresh = try await authenticator.phone("Bearer " + token)
            guard fresh.userID == session.user, fresh.sessionID == session.sessionID else { return .expired }
            return .renewed(fresh.expiresAt)
        } catch .unavailable {
            return .unavailable
        } catch .deviceRemoved, .revoked {
            return .revoked
        } catch {
            return .expired
        }
    }

    /// `relay.device_hellos` of `batch`, with one element's failure kept to itself: when
    /// the database refuses the call (a server error, such as a device row inserted past the
    /// cap through the API at the same moment), the batch is halved until the hello that
    /// fails stands alone, and only that socket is `failed` (1011 "try again").
    /// Nil when the database could not be reached at all.
    func helloStatuses(_ batch: [State.Hello]) async -> RelayDatabase.HelloBatch? {
        do {
            return try await database.deviceHellos(instance: instance, batch.map(\.database))
        } catch let error as PGError where error.code == .server {
            guard batch.count > 1 else {
                logger.failure("device_hello_refused", error, ["connection": batch[0].handle.connection.uuidString])
                return RelayDatabase.HelloBatch(statuses: [:], failed: [batch[0].handle.connection], pending: [])
            }
            logger.warning("device_hello_batch_split", ["sockets": String(batch.count), "sqlstate": error.sqlState ?? ""])
            var statuses: [UUID: RelayStatus.Hello] = [:]
            var failed = Set<UUID>()
            var pending: [(owner: UUID, ping: LocateMessage)] = []
            var sent = Set<UUID>()  // a user's waiting pings come back from each half that holds the user
            for half in [Array(batch[..<(batch.count / 2)]), Array(batch[(batch.count / 2)...])] {
                guard let part = await helloStatuses(half) else {
                    failed.formUnion(half.map(\.handle.connection))
                    continue
                }
                statuses.merge(part.statuses) { first, _ in first }
                failed.formUnion(part.failed)
                for entry in part.pending where sent.insert(entry.ping.id).inserted { pending.append(entry) }
            }
            return RelayDatabase.HelloBatch(statuses: statuses, failed: failed, pending: pending)
        } catch {
            logger.failure("device_hello_failed", error, ["sockets": String(batch.count)])
            return nil
        }
    }
}

/// Why a resync stopped (the maintenance retries at the next beat).
enum DeviceHubError: Error {
    case reregistrationFailed
    case settleFailed
}

private extension InstanceState.Action {
    /// The socket whose own message this awaited action answers; nil for the others.
    var socket: UUID? {
        switch self {
        case .settle(let answer): answer.record.handle.connection
        case .checkToken(let handle, _), .account(let handle, _, _): handle.connection
        default: nil
        }
    }
}
