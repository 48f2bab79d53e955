import Foundation
import HTTPServer
import Synchronization

/// The holder side of the device protocol on one instance: which phones are connected
/// here, pings out, answers in (sealed to the waiter), cancels, replacement and revocation.
///
/// The hub performs I/O; what it decides is kept in small I/O-free parts: `PhoneDirectory`
/// (compact records and their indexes), `PingLedger` (who got which ping),
/// `HellosInFlight` (pings for phones whose hello is in the database) and three
/// `CallBatcher`s, so that hellos, disconnects and delivered marks of many sockets go to
/// the database as one set-based call each (a reconnect storm costs O(batches)).
///
/// Nothing a phone said is lost to a database outage: an answer that cannot be settled is
/// held and settled again at every resync until its request expires.
///
/// A socket is only as good as its credential (SPEC §5): its own deadline (its WebSocket's
/// close deadline; no sweep visits every socket) closes it when it said no hello within
/// `helloTimeout` (1008) and when its token expired without a fresh `token` message (4001
/// "token_expired"); `closeRevoked()` at every heartbeat closes sockets whose session was
/// signed out or revoked or whose device was removed (4000).
public actor DeviceHub {
    /// Close code for a replaced or revoked device (the app must not reconnect by itself).
    public static let replacedCode: UInt16 = 4000
    /// Close code for an expired or unusable credential (the app signs in again).
    public static let tokenExpiredCode: UInt16 = 4001
    /// Close code for a socket past the user's cap (`RelayDatabase.maxSocketsPerUser`).
    public static let tooManyDevicesCode: UInt16 = 4002
    /// How long a socket may stay without saying hello.
    public static let helloTimeout: TimeInterval = 10
    /// How long an answer to a ping this hub never sent is held (longer than any request).
    static let heldAnswerFallbackLifetime: TimeInterval = 130
    /// Hellos go at once when a call slot is free; those arriving while calls run go
    /// together when one returns (a storm's batches form by themselves).
    static let helloWindow: Duration = .zero
    /// Hellos per `relay.device_hellos` call from sockets (re-registration sends the most
    /// the function takes).
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
    /// Sockets that have not said hello yet (touched from the loop thread at open).
    private nonisolated let newcomers = Mutex<[UUID: DeviceSession]>([:])
    private var phones = PhoneDirectory<DeviceSession>()
    var pings = PingLedger()
    private var held: [UUID: HeldAnswer] = [:]           // by request
    private var hellosInFlight = HellosInFlight()
    /// Sockets whose hello is waiting for or inside a batch, with what resumes the socket's
    /// event queue when it is done (its next messages are handled after its hello).
    private var helloing: [UUID: CheckedContinuation<Void, Never>] = [:]
    /// Hellos refused because this instance's row was gone: said again at re-registration.
    private var unregistered: [UUID: Hello] = [:]
    var hellos = CallBatcher<Hello>(window: helloWindow, maximumBatch: helloBatch, maximumInFlight: 2)
    var disconnects = CallBatcher<UUID>(window: disconnectWindow, maximumBatch: RelayDatabase.maxDisconnectsPerBatch)
    var delivered = CallBatcher<UUID>(window: deliveredMarkDelay, maximumBatch: RelayDatabase.maxDelivered)
    /// Asks the instance's maintenance for a heartbeat and a re-registration (set at start).
    private var reregistrationNeeded: @Sendable () -> Void = {}
    /// Whether it was asked since the last re-registration (a storm of refused hellos asks once).
    private var reregistrationRequested = false

    /// A hello to register: the socket and what its phone said (no app version at
    /// re-registration: the relay keeps none, and the database leaves it unchanged).
    struct Hello: Sendable {
        let session: DeviceSession
        let device: UUID
        let name: String
        let platform: PhoneDirectory<DeviceSession>.Platform
        let appVersion: String?

        var database: RelayDatabase.SocketHello {
            .init(connection: session.connection, user: session.user, session: session.sessionID, device: device,
                  name: name, platform: platform.text, appVersion: appVersion, openedAt: session.openedAt)
        }
    }

    /// An answer the database could not take yet.
    private struct HeldAnswer {
        let record: PhoneDirectory<DeviceSession>.Record
        let reply: PhoneMessage.PhoneReply
        let expires: Date
    }

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
    }

    /// What to call when a hello finds this instance's row gone (reaped, or lost in a
    /// crash): the maintenance beats now, which re-creates the row, and re-registers.
    func onReregistrationNeeded(_ request: @escaping @Sendable () -> Void) {
        reregistrationNeeded = request
    }

    /// A socket opened; it has `helloTimeout` to say hello.
    nonisolated func awaitHello(_ session: DeviceSession) {
        newcomers.withLock { $0[session.connection] = session }
    }

    /// Closes this instance's sockets whose session was signed out or revoked, or whose
    /// device was removed (4000 "revoked"); called at every heartbeat.
    func closeRevoked() async throws {
        for connection in try await database.revokedConnections(on: instance) {
            guard let session = phones[connection]?.handle else { continue }
            session.close(code: Self.replacedCode, reason: "revoked")
            await authenticator.forgetSession(session.sessionID)
        }
    }

    /// Phones connected here (after hello).
    public var connectedCount: Int { phones.count }

    /// Answers waiting for the database (for /metrics).
    public var heldCount: Int { held.count }

    /// Sockets that have not said hello yet, per account and client address.
    nonisolated let waitingRoom = HelloWaitingRoom()

    /// A new socket for a verified phone from `address`, for
    /// `HTTPResponse.webSocket(delegate:)`; nil when its account or address already has as
    /// many sockets waiting for their hello as it may (answer 429).
    nonisolated func session(for phone: PhoneIdentity, address: String) -> DeviceSession? {
        guard let ticket = waitingRoom.admit(account: phone.userID, address: address) else { return nil }
        return DeviceSession(phone: phone, hub: self, waiting: ticket)
    }

    // MARK: From the phones

    func handle(_ event: DeviceSession.Event, from session: DeviceSession) async {
        switch event {
        case .closed:
            session.leaveWaitingRoom()
            newcomers.withLock { $0[session.connection] = nil }
            unregistered[session.connection] = nil
            // Never registered: no row to remove (a hello still in flight removes its own).
            guard phones.remove(session.connection) != nil else { return }
            perform(disconnects.add(session.connection), .disconnects)
        case .message(let text):
            switch PhoneMessage.parse(text) {
            case .hello(let device, let name, let platform, let version):
                session.leaveWaitingRoom()
                // One hello per socket.
                guard phones[session.connection] == nil, helloing[session.connection] == nil,
                      unregistered[session.connection] == nil else { return }
                let hello = Hello(session: session, device: device, name: name, platform: .init(platform), appVersion: version)
                await withCheckedContinuation { done in
                    helloing[session.connection] = done
                    hellosInFlight.begin(session.user)
                    perform(hellos.add(hello))
                }
            case .account(let request):
                guard let device = phones[session.connection]?.device else { return }  // no hello yet
                session.send(await account.handle(request, user: session.user, device: device))
            case .answer(let id, let reply):
                await answer(session, id: id, reply: reply)
            case .token(let token):
                await renew(session, with: token)
            case .log:
                logger.info("phone_log", ["connection": session.connection.uuidString])  // never the message itself
            case .unknown, nil:
                break
            }
        }
    }

    /// Registers `batch` in one call and acts on each socket's status; false when the
    /// database could not be reached (the sockets that are not registered yet are closed
    /// 1011 "try again", registered ones stay).
    @discardableResult
    func register(_ batch: [Hello]) async -> Bool {
        // A hello that arrives after its socket closed must not replace a live socket.
        let live = batch.filter { !$0.session.isClosed }
        let result = live.isEmpty ? nil : await helloStatuses(live)
        var pending: [UUID: [LocateMessage]] = [:]
        for (owner, ping) in result?.pending ?? [] { pending[owner, default: []].append(ping) }
        for hello in batch {
            let session = hello.session, connection = session.connection
            let kept = hellosInFlight.end(session.user)
            defer { helloing.removeValue(forKey: connection)?.resume() }
            newcomers.withLock { $0[connection] = nil }
            if result?.failed.contains(connection) == true {
                session.close(code: WebSocketCloseCode.internalError, reason: "try again")
                continue
            }
            guard let status = result?.statuses[connection] else {
                if result == nil, !live.isEmpty, phones[connection] == nil {
                    session.close(code: WebSocketCloseCode.internalError, reason: "try again")
                }
                continue
            }
            switch status {
            case .ok:
                guard !session.isClosed else {  // closed while the hello ran: forget the row just made
                    perform(disconnects.add(connection), .disconnects)
                    continue
                }
                phones.insert(.init(handle: session, device: hello.device, platform: hello.platform, name: hello.name),
                              connection: connection)
                for ping in (pending[session.user] ?? []) + kept { send(ping, to: session) }
                // The browser phone keeps its always-allowed list from the relay (APP.md §A.3),
                // sent after its own hello (a re-registration carries no app version).
                if hello.platform == .web, hello.appVersion != nil {
                    let account = self.account, user = session.user
                    Task(executorPreference: executor) { if let list = await account.alwaysAllowed(user: user) { session.send(list) } }
                }
            case .unregistered:
                // Said again at the re-registration (a registered socket is in it anyway).
                if phones[connection] == nil { unregistered[connection] = hello }
                if !reregistrationRequested {
                    reregistrationRequested = true
                    reregistrationNeeded()
                }
            case .revoked:
                session.close(code: Self.replacedCode, reason: "revoked")
            case .replaced:
                session.close(code: Self.replacedCode, reason: "replaced")
            case .tooMany, .tooManyDevices:
                session.close(code: Self.tooManyDevicesCode, reason: "too_many_devices")
            case .invalid:
                session.close(code: WebSocketCloseCode.policyViolation, reason: "invalid hello")
            case .forbidden:
                session.close(code: WebSocketCloseCode.policyViolation, reason: "device belongs to another user")
            }
        }
        if helloing.isEmpty { helloing = [:] }  // a storm's table is given back
        return result != nil || live.isEmpty
    }

    /// A `token` message: a fresh access token for the same user and session, without
    /// client_id, keeps the socket open past the old token's expiry; anything else closes
    /// it 4001 "token_expired".
    private func renew(_ session: DeviceSession, with token: String) async {
        do {
            let fresh = try await authenticator.phone("Bearer " + token)
            guard fresh.userID == session.user, fresh.sessionID == session.sessionID else {
                session.close(code: Self.tokenExpiredCode, reason: "token_expired")
                return
            }
            session.renewCredential(until: fresh.expiresAt)
        } catch .unavailable {
            logger.warning("token_check_unavailable", ["connection": session.connection.uuidString])
        } catch .deviceRemoved, .revoked {
            session.close(code: Self.replacedCode, reason: "revoked")
        } catch {
            session.close(code: Self.tokenExpiredCode, reason: "token_expired")
        }
    }

    private func answer(_ session: DeviceSession, id: UUID, reply: PhoneMessage.PhoneReply) async {
        guard let record = phones[session.connection] else { return }  // no hello yet
        // The answering phone needs no cancel for its own answer; the key came with this
        // socket's own ping (for any other id the database is asked).
        let replyKey = pings.answered(id, by: session.connection)
        let settled: RelayStatus.Settle?
        do {
            settled = try await settler.settle(id: id, user: session.user, device: record.device, deviceName: record.name,
                                               platform: record.platform.text, reply: reply, replyKey: replyKey)
            if settled == .settled { cancel(request: id) }  // the database does not notify this instance
        } catch {
            logger.failure("answer_held", error, ["request": id.uuidString])
            settled = nil  // the database is unreachable
        }
        // Held until the database takes it: after an error, and after `gone` for a ping that
        // was not cancelled (its row may be waiting to be re-created after a crash; the
        // cancel that follows a normal settle by another phone drops it).
        if settled == nil || (settled == .gone && pings.contains(id)) {
            let expires = pings.expiry(of: id) ?? Date().addingTimeInterval(Self.heldAnswerFallbackLifetime)
            held[id] = HeldAnswer(record: record, reply: reply, expires: expires)
        }
    }

    // MARK: From the bus

    /// A new request for `owner` (its notification, or the waiter here): ping every phone
    /// of the owner connected here, and keep it for a hello of theirs still in flight.
    public func locate(_ ping: LocateMessage, owner: UUID) {
        hellosInFlight.keep(ping, for: owner)
        for connection in phones.connections(ofUser: owner) ?? .many([]) {
            if let session = phones[connection]?.handle { send(ping, to: session) }
        }
    }

    /// A request ended (its cancel notification, or an answer settled here): tell every
    /// phone that got the ping.
    public func cancel(request: UUID) {
        held[request] = nil
        for connection in pings.end(request) {
            phones[connection]?.handle.send(#"{"type":"cancel","id":"\#(UUIDText.lowercase(request))"}"#)
        }
    }

    /// A `whereabot_device` notification: close older sockets of a device that said hello
    /// elsewhere (4000 "replaced"), or every socket of a revoked device (4000 "revoked").
    public func deviceEvent(device: UUID, event: String, connection: UUID?) async {
        for id in phones.connections(ofDevice: device) ?? .many([]) where id != connection {
            guard let session = phones[id]?.handle else { continue }
            session.close(code: Self.replacedCode, reason: event == "revoked" ? "revoked" : "replaced")
            // A removed device revokes its session: no cached "alive" may outlast that here.
            if event == "revoked" { await authenticator.forgetSession(session.sessionID) }
        }
    }

    // MARK: Resync and drain

    /// Catches up with the tables: re-registers every socket when `reregister` (after a
    /// reconnect, or when this instance's row was gone), in calls of up to
    /// `RelayDatabase.maxHellosPerBatch`; sends pings whose notification was missed,
    /// settles held answers, and forgets expired pings.
    public func resync(reregister: Bool) async throws {
        let now = Date()
        pings.forgetExpired(now: now)
        held = held.filter { $0.value.expires > now }
        if reregister {
            reregistrationRequested = false
            let all = phones.all.map { Hello(session: $0.handle, device: $0.device, name: $0.name, platform: $0.platform,
                                             appVersion: nil) } + unregistered.values.filter { phones[$0.session.connection] == nil }
            unregistered = [:]
            for batch in all.chunks(of: RelayDatabase.maxHellosPerBatch) {
                for hello in batch { hellosInFlight.begin(hello.session.user) }
                guard await register(batch) else { throw DeviceHubError.reregistrationFailed }
            }
        }
        for (owner, ping) in try await database.pendingLocates(on: instance) { locate(ping, owner: owner) }
        for (id, answer) in held {
            let settled = try await settler.settle(id: id, user: answer.record.handle.user, device: answer.record.device,
                                                   deviceName: answer.record.name, platform: answer.record.platform.text,
                                                   reply: answer.reply, replyKey: pings.replyKey(of: id))
            if settled == .settled { cancel(request: id) }
            // `gone` may mean the waiter has not re-created the row after a crash yet: keep
            // trying until the request expires (a cancel drops it sooner).
            if settled != .gone { held[id] = nil }
        }
    }

    /// Drain: forgets every socket of this instance in one call, then closes them (the
    /// phones reconnect to another instance).
    public func closeAll(code: UInt16, reason: String) async {
        do { try await database.drainConnections(on: instance) } catch {
            logger.failure("drain_connections_failed", error)  // each socket's close forgets it then
        }
        for phone in phones.all { phone.handle.close(code: code, reason: reason) }
    }

    // MARK: Pings out (the batched calls are in DeviceHub+Calls.swift)

    private func send(_ ping: LocateMessage, to session: DeviceSession) {
        let sent = pings.send(ping, to: session.connection)
        guard sent.send else { return }  // each id once per socket
        session.send(ping.phoneJSON)
        if sent.firstForRequest { perform(delivered.add(ping.id), .deliveredMarks) }
    }
}

/// Why a re-registration stopped (the maintenance retries at the next beat).
enum DeviceHubError: Error {
    case reregistrationFailed
}
