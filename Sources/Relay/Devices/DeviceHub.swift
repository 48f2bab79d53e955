import Foundation
import HTTPServer
import Synchronization

/// The holder side of the device protocol on one instance: which phones are connected
/// here, pings out, answers in (sealed to the waiter), cancels, replacement and revocation.
///
/// Nothing a phone said is lost to a database outage: an answer that cannot be settled is
/// held and settled again at every resync until its request expires.
///
/// A socket is only as good as its credential (SPEC §5): `run()` closes sockets that said
/// no hello within `helloTimeout` (1008) and sockets whose token expired without a fresh
/// `token` message (4001 "token_expired"); `closeRevoked()` at every heartbeat closes
/// sockets whose session was signed out or revoked or whose device was removed (4000).
public actor DeviceHub {
    /// Close code for a replaced or revoked device (the app must not reconnect by itself).
    public static let replacedCode: UInt16 = 4000
    /// Close code for an expired or unusable credential (the app signs in again).
    public static let tokenExpiredCode: UInt16 = 4001
    /// Close code for a socket past the user's cap (`RelayDatabase.maxSocketsPerUser`).
    public static let tooManyDevicesCode: UInt16 = 4002
    /// How long a socket may stay without saying hello.
    public static let helloTimeout: TimeInterval = 10
    /// How often `run()` looks for silent newcomers and expired credentials.
    static let sweepInterval: Duration = .seconds(1)
    /// How long an answer to a ping this hub never sent is held (longer than any request).
    static let heldAnswerFallbackLifetime: TimeInterval = 130

    private let instance: String
    private let database: RelayDatabase
    private let settler: AnswerSettler
    private let authenticator: Authenticator
    private let logger: Logger
    private let account: PhoneAccount
    /// Where the sockets' events are handled (the loop that owns the sockets), if any.
    nonisolated let executor: (any TaskExecutor)?
    private let timers: RelayTimers
    /// How long sent pings wait before they are marked delivered together: most are
    /// answered sooner (and settling marks them), and only the 503/504 choice at a deadline
    /// (seconds later) reads the mark.
    static let deliveredMarkDelay: Duration = .milliseconds(200)
    /// Sockets that have not said hello yet (touched from the loop thread at open).
    private nonisolated let newcomers = Mutex<[UUID: DeviceSession]>([:])
    private var phones: [UUID: Phone] = [:]             // by connection, after hello
    private var byUser: [UUID: Set<UUID>] = [:]         // user → connections (pings)
    private var byDevice: [UUID: Set<UUID>] = [:]       // device → connections (replaced, revoked)
    private var pinged: [UUID: Ping] = [:]              // by request
    private var held: [UUID: HeldAnswer] = [:]          // by request
    private var helloing: [UUID: HelloInFlight] = [:]   // by user, while a hello is in the database
    private var undelivered: [UUID] = []                // pings sent, not yet marked delivered
    private var markingDelivered = false

    /// A socket whose phone said hello.
    private struct Phone {
        let session: DeviceSession
        let device: Device
    }

    /// What a phone said of itself in its hello.
    private struct Device {
        let id: UUID
        let name: String
        let platform: String
        let appVersion: String
    }

    /// Which sockets got a ping (each gets it once) and which answered it (they need no
    /// cancel), until it expires or is cancelled.
    private struct Ping {
        let expires: Date
        /// The waiter's key to seal a fix to (from the database with the ping).
        let replyKey: [UInt8]?
        var connections: Set<UUID> = []
        var answered: Set<UUID> = []
    }

    /// Hellos of one user in the database now, and the pings that arrived meanwhile: the
    /// socket is not indexed yet, so they are sent when its hello returns.
    struct HelloInFlight {
        /// The most pings kept (a user's waiting requests are capped far lower).
        static let maximumPings = 64

        var count = 0
        private(set) var pings: [LocateMessage] = []

        /// Keeps `ping` for the hello, unless `maximumPings` are kept already.
        mutating func keep(_ ping: LocateMessage) {
            if pings.count < Self.maximumPings { pings.append(ping) }
        }
    }

    /// An answer the database could not take yet.
    private struct HeldAnswer {
        let user: UUID
        let device: Device
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

    /// Closes silent newcomers and sockets with expired credentials every second, until
    /// the task is cancelled.
    func run() async {
        while !Task.isCancelled {
            try? await Task.sleep(for: Self.sweepInterval)
            sweep(now: Date())
        }
    }

    /// A socket opened; it has `helloTimeout` to say hello.
    nonisolated func awaitHello(_ session: DeviceSession) {
        newcomers.withLock { $0[session.connection] = session }
    }

    /// One pass of `run()`.
    func sweep(now: Date) {
        let silent = newcomers.withLock { newcomers -> [DeviceSession] in
            let late = newcomers.values.filter { now.timeIntervalSince($0.openedAt) >= Self.helloTimeout }
            for session in late { newcomers[session.connection] = nil }
            return late
        }
        for session in silent { session.close(code: WebSocketCloseCode.policyViolation, reason: "hello timeout") }
        for phone in phones.values
        where now.timeIntervalSince(phone.session.credentialExpiresAt) > JWTVerifier.defaultLeeway {
            phone.session.close(code: Self.tokenExpiredCode, reason: "token_expired")
        }
    }

    /// Closes this instance's sockets whose session was signed out or revoked, or whose
    /// device was removed (4000 "revoked"); called at every heartbeat.
    func closeRevoked() async throws {
        for connection in try await database.revokedConnections(on: instance) {
            guard let session = phones[connection]?.session else { continue }
            session.close(code: Self.replacedCode, reason: "revoked")
            await authenticator.forgetSession(session.phone.sessionID)
        }
    }

    /// Phones connected here (after hello).
    public var connectedCount: Int { phones.count }

    /// Answers waiting for the database (for /metrics).
    public var heldCount: Int { held.count }

    /// A new socket for a verified phone; hand the result to `HTTPResponse.webSocket(delegate:)`.
    nonisolated func session(for phone: PhoneIdentity) -> DeviceSession {
        DeviceSession(phone: phone, hub: self)
    }

    // MARK: From the phones

    func handle(_ event: DeviceSession.Event, from session: DeviceSession) async {
        switch event {
        case .closed:
            newcomers.withLock { $0[session.connection] = nil }
            guard forget(session) else { return }  // never registered: no row to remove
            await disconnect(session)
        case .message(let text):
            switch PhoneMessage.parse(text) {
            case .hello(let device, let name, let platform, let version):
                guard phones[session.connection] == nil else { return }  // one hello per socket
                await hello(session, Device(id: device, name: name, platform: platform, appVersion: version))
                // The browser phone keeps its always-allowed list from the relay (APP.md §A.3).
                if platform == "web", phones[session.connection] != nil,
                   let list = await account.alwaysAllowed(user: session.phone.userID) { session.send(list) }
            case .account(let request):
                guard let device = phones[session.connection]?.device else { return }  // no hello yet
                session.send(await account.handle(request, user: session.phone.userID, device: device.id))
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

    /// Registers the socket (at hello, and again at resync) and sends the pending pings.
    private func hello(_ session: DeviceSession, _ device: Device) async {
        // A hello that arrives after its socket closed must not replace a live socket.
        guard !session.isClosed else { return }
        let user = session.phone.userID
        helloing[user, default: HelloInFlight()].count += 1
        let result: RelayDatabase.Hello
        defer {
            helloing[user]?.count -= 1
            if helloing[user]?.count == 0 { helloing[user] = nil }
        }
        do {
            result = try await database.deviceHello(instance: instance, connection: session.connection, user: session.phone.userID,
                                                    session: session.phone.sessionID, device: device.id, name: device.name,
                                                    platform: device.platform, appVersion: device.appVersion,
                                                    openedAt: session.openedAt)
        } catch {
            logger.failure("device_hello_failed", error, ["connection": session.connection.uuidString])
            if phones[session.connection] == nil { session.close(code: WebSocketCloseCode.internalError, reason: "try again") }
            return
        }
        newcomers.withLock { $0[session.connection] = nil }
        switch result.status {
        case "ok":
            guard !session.isClosed else {  // closed while hello ran: forget the row just made
                await disconnect(session)
                return
            }
            remember(session, device)
            for ping in result.pending + (helloing[user]?.pings ?? []) { send(ping, to: session) }
        case "revoked":
            session.close(code: Self.replacedCode, reason: "revoked")
        case "replaced":
            session.close(code: Self.replacedCode, reason: "replaced")
        case "too_many":
            session.close(code: Self.tooManyDevicesCode, reason: "too_many_devices")
        default:
            session.close(code: WebSocketCloseCode.policyViolation, reason: "device belongs to another user")
        }
    }

    /// Removes a closed socket's row (the reaper or the device's next hello would too).
    private func disconnect(_ session: DeviceSession) async {
        do {
            try await database.deviceDisconnect(session.connection)
        } catch {
            logger.failure("device_disconnect_failed", error, ["connection": session.connection.uuidString])
        }
    }

    /// A `token` message: a fresh access token for the same user and session, without
    /// client_id, keeps the socket open past the old token's expiry; anything else closes
    /// it 4001 "token_expired".
    private func renew(_ session: DeviceSession, with token: String) async {
        do {
            let fresh = try await authenticator.phone("Bearer " + token)
            guard fresh.userID == session.phone.userID, fresh.sessionID == session.phone.sessionID else {
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
        guard let device = phones[session.connection]?.device else { return }  // no hello yet
        // The answering phone needs no cancel for its own answer; the others get one.
        pinged[id]?.answered.insert(session.connection)
        // The key came with this socket's own ping; for any other id the database is asked.
        let replyKey = pinged[id].flatMap { $0.connections.contains(session.connection) ? $0.replyKey : nil }
        let settled: RelayDatabase.Settled?
        do {
            settled = try await settler.settle(id: id, user: session.phone.userID, device: device.id,
                                               deviceName: device.name, platform: device.platform, reply: reply,
                                               replyKey: replyKey)
            if settled == .settled { cancel(request: id) }  // the database does not notify this instance
        } catch {
            logger.failure("answer_held", error, ["request": id.uuidString])
            settled = nil  // the database is unreachable
        }
        // Held until the database takes it: after an error, and after `gone` for a ping that
        // was not cancelled (its row may be waiting to be re-created after a crash; the
        // cancel that follows a normal settle by another phone drops it).
        if settled == nil || (settled == .gone && pinged[id] != nil) {
            let expires = pinged[id]?.expires ?? Date().addingTimeInterval(Self.heldAnswerFallbackLifetime)
            held[id] = HeldAnswer(user: session.phone.userID, device: device, reply: reply, expires: expires)
        }
    }

    // MARK: From the bus

    /// A new request for `owner` (its notification, or the waiter here): ping every phone
    /// of the owner connected here, and keep it for a hello of theirs still in flight.
    public func locate(_ ping: LocateMessage, owner: UUID) {
        helloing[owner]?.keep(ping)
        for connection in byUser[owner] ?? [] {
            if let session = phones[connection]?.session { send(ping, to: session) }
        }
    }

    /// A request ended (its cancel notification, or an answer settled here): tell every
    /// phone that got the ping.
    public func cancel(request: UUID) {
        held[request] = nil
        guard let ping = pinged.removeValue(forKey: request) else { return }
        for connection in ping.connections.subtracting(ping.answered) {
            phones[connection]?.session.send(#"{"type":"cancel","id":"\#(UUIDText.lowercase(request))"}"#)
        }
    }

    /// A `whereabot_device` notification: close older sockets of a device that said hello
    /// elsewhere (4000 "replaced"), or every socket of a revoked device (4000 "revoked").
    public func deviceEvent(device: UUID, event: String, connection: UUID?) async {
        for id in byDevice[device] ?? [] where id != connection {
            guard let session = phones[id]?.session else { continue }
            session.close(code: Self.replacedCode, reason: event == "revoked" ? "revoked" : "replaced")
            // A removed device revokes its session: no cached "alive" may outlast that here.
            if event == "revoked" { await authenticator.forgetSession(session.phone.sessionID) }
        }
    }

    // MARK: Resync and drain

    /// Catches up with the tables: re-registers every socket when `reregister` (after a
    /// reconnect or a crash that emptied relay.connections), sends pings whose
    /// notification was missed, settles held answers, and forgets expired pings.
    public func resync(reregister: Bool) async throws {
        let now = Date()
        pinged = pinged.filter { $0.value.expires > now }
        held = held.filter { $0.value.expires > now }
        if reregister {
            for phone in Array(phones.values) { await hello(phone.session, phone.device) }
        }
        for (owner, ping) in try await database.pendingLocates(on: instance) { locate(ping, owner: owner) }
        for (id, answer) in held {
            let settled = try await settler.settle(id: id, user: answer.user, device: answer.device.id,
                                                   deviceName: answer.device.name, platform: answer.device.platform,
                                                   reply: answer.reply, replyKey: pinged[id]?.replyKey)
            if settled == .settled { cancel(request: id) }
            // `gone` may mean the waiter has not re-created the row after a crash yet: keep
            // trying until the request expires (a cancel drops it sooner).
            if settled != .gone { held[id] = nil }
        }
    }

    /// Closes every device socket (drain): the phones reconnect to another instance.
    public func closeAll(code: UInt16, reason: String) {
        for phone in phones.values { phone.session.close(code: code, reason: reason) }
    }

    /// Indexes a socket that said hello (by connection, user and device).
    private func remember(_ session: DeviceSession, _ device: Device) {
        phones[session.connection] = Phone(session: session, device: device)
        byUser[session.phone.userID, default: []].insert(session.connection)
        byDevice[device.id, default: []].insert(session.connection)
    }

    /// Drops a closed socket from every index; false when it never said hello.
    private func forget(_ session: DeviceSession) -> Bool {
        guard let device = phones.removeValue(forKey: session.connection)?.device else { return false }
        byUser[session.phone.userID]?.remove(session.connection)
        if byUser[session.phone.userID]?.isEmpty == true { byUser[session.phone.userID] = nil }
        byDevice[device.id]?.remove(session.connection)
        if byDevice[device.id]?.isEmpty == true { byDevice[device.id] = nil }
        return true
    }

    private func send(_ ping: LocateMessage, to session: DeviceSession) {
        let expires = Date(timeIntervalSince1970: TimeInterval(ping.expiresMs) / 1000)
        guard !(pinged[ping.id]?.connections.contains(session.connection) ?? false) else { return }  // each id once
        if pinged[ping.id] == nil {
            pinged[ping.id] = Ping(expires: expires, replyKey: ping.replyKey)
            undelivered.append(ping.id)
        }
        pinged[ping.id]!.connections.insert(session.connection)
        session.send(ping.phoneJSON)
        if !markingDelivered {
            markingDelivered = true
            _ = timers.after(Self.deliveredMarkDelay) { await self.markDelivered() }
        }
    }

    /// Records the pings sent in the last `deliveredMarkDelay` as delivered, off the
    /// locate's path and in one call; pings answered or cancelled meanwhile need no mark.
    private func markDelivered() async {
        while !undelivered.isEmpty {
            let batch = Array(undelivered.prefix(RelayDatabase.maxDelivered)).filter { pinged[$0] != nil }
            undelivered.removeFirst(min(undelivered.count, RelayDatabase.maxDelivered))
            if batch.isEmpty { continue }
            do { try await database.markDelivered(batch) } catch {
                logger.failure("mark_delivered_failed", error, ["requests": String(batch.count)])
            }
        }
        markingDelivered = false
    }
}
