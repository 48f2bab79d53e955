import Foundation
import JSON
import Lifecycle
import PGBus
import RelayCore

/// The relay's only way into Postgres: one typed method per `relay.*` function, called as
/// the `whereabot_relay` role (which can read no table). No SQL lives elsewhere in Relay.
public struct RelayDatabase: Sendable {
    let pool: PGPool
    /// Opens and settles that come while others are in flight wait and go as one call.
    let opens: CallCoalescer<OpenCall, Opened>
    let settles: CallCoalescer<SettleCall, RelayStatus.Settle>
    /// The tasks of every batched call made through this gateway (its coalescers', the
    /// session checks'): the pool shuts down once none runs (`RelayService`, "Lifecycle").
    let batches = OwnedTasks()

    /// Creates a gateway over a pool connected as `whereabot_relay`. A location settled
    /// under a for-good always-allow standing `grantReminderSeconds` since it was made or
    /// kept sends its reminder (docs/protocol.md, "Reminders"; nil: no reminders).
    public init(pool: PGPool, grantReminderSeconds: Int? = nil) {
        self.pool = pool
        self.opens = Self.openCoalescer(pool, tasks: batches)
        self.settles = Self.settleCoalescer(pool, remindAfter: grantReminderSeconds, tasks: batches)
    }

    // MARK: Instances

    /// What an earlier process under the same instance id left behind, cleaned at start.
    public struct Registered: Sendable, Equatable {
        /// Its socket rows, removed.
        public let connections: Int
        /// Its waiting requests, abandoned (their pings cancelled).
        public let abandoned: Int
    }

    /// Registers this instance (at start), forgetting what an earlier process left.
    @discardableResult
    public func registerInstance(_ instance: String) async throws -> Registered {
        let json = try await pool.send("select relay.register_instance($1)", [instance]).scalar(PGJSON.self).parsed()
        return Registered(connections: try Self.count(json, "connections", from: "register_instance"),
                          abandoned: try Self.count(json, "abandoned", from: "register_instance"))
    }

    /// Beats; true when the instance's row had vanished (resync needed).
    public func heartbeat(_ instance: String) async throws -> Bool {
        try await pool.send("select relay.heartbeat($1)", [instance]).scalar(Bool.self)
    }

    /// What one `reap` cleaned up.
    public struct ReapReport: Sendable, Equatable {
        /// Dead instances removed.
        public let instances: Int
        /// Their sockets removed.
        public let connections: Int
        /// Requests of dead waiters settled as abandoned.
        public let abandoned: Int
        /// Requests far past their deadline settled as expired.
        public let expired: Int
        /// Old settled requests deleted.
        public let deleted: Int
    }

    /// Reaps instances silent for `deadAfter` and old requests.
    public func reap(deadAfter seconds: Int = 30) async throws -> ReapReport {
        let json = try await pool.send("select relay.reap(make_interval(secs => $1))", [seconds]).scalar(PGJSON.self).parsed()
        func count(_ key: String) throws -> Int { try Self.count(json, key, from: "reap") }
        return ReapReport(instances: try count("instances"), connections: try count("connections"), abandoned: try count("abandoned"),
                          expired: try count("expired"), deleted: try count("deleted"))
    }

    // MARK: Requests

    /// What `openRequest` did.
    public typealias Opened = RelayRows.Opened

    /// Opens a locate request; the instances holding the owner's other sockets are notified.
    /// Under load it goes with others in one `relay.open_requests` call; a request on
    /// someone else's behalf always goes alone (its second lock has no order with the owners').
    /// `reason`: the agent's cleaned reason (`LocateReason`), shown in the ping.
    public func openRequest(id: UUID, owner: UUID, requester: UUID?, clientID: String, clientName: String?,
                            instance: String, replyKey: [UInt8], expiresAt: Date, maxWaiting: Int,
                            reason: String? = nil) async throws -> Opened {
        let call = OpenCall(id: id, owner: owner, clientID: clientID, clientName: clientName, instance: instance,
                            replyKey: replyKey, expiresAt: expiresAt, maxWaiting: maxWaiting, reason: reason)
        if let requester, requester != owner { return try await Self.openOne(pool, call, requester: requester) }
        return try await opens.call(call)
    }

    /// The `Opened` of an open_request-shaped result.
    static func opened(_ json: JSONValue, function: String) throws -> Opened {
        let status: RelayStatus.Open = try Self.status(json, "status", from: function)
        var ping: LocateMessage?
        if let value = json["ping"], !value.isNull {
            guard let message = LocateMessage(json: value) else { throw Self.malformed(function) }
            ping = message
        }
        var quiet: RelayRows.QuietHours?
        if status == .quiet {
            guard let window = json["quiet"], let untilMs = window["until_ms"]?.integer,
                  let local = window["local"]?.string, let name = window["name"]?.string else { throw Self.malformed(function) }
            quiet = RelayRows.QuietHours(name: name, until: Date(timeIntervalSince1970: Double(untilMs) / 1000), local: local)
        }
        return Opened(status: status, connections: json["connections"]?.integer.map(Int.init), ping: ping, quiet: quiet)
    }

    /// The error for a result of a `relay.*` function that does not have its documented shape.
    static func malformed(_ function: String) -> PGError {
        PGError(.decoding, detail: "relay.\(function) returned an unexpected shape")
    }

    /// The status word `word` of a result of `function`.
    /// - Throws: `PGError.decoding` for a missing or unknown word.
    static func status<Status: RawRepresentable<String>>(_ word: String?, from function: String) throws -> Status {
        guard let word, let status = Status(rawValue: word) else { throw malformed(function) }
        return status
    }

    /// The status word at `key` of a JSON result of `function`.
    static func status<Status: RawRepresentable<String>>(_ json: JSONValue, _ key: String, from function: String) throws -> Status {
        try status(json[key]?.string, from: function)
    }

    /// An optional status word (JSON null or absent is nil).
    static func optionalStatus<Status: RawRepresentable<String>>(_ word: String?, from function: String) throws -> Status? {
        guard let word else { return nil }
        return try status(word, from: function) as Status
    }

    /// The non-negative integer at `key` of a JSON result of `function`.
    static func count(_ json: JSONValue, _ key: String, from function: String) throws -> Int {
        guard let value = json[key]?.integer, value >= 0, value <= Int64(Int.max) else { throw malformed(function) }
        return Int(value)
    }

    /// The most ids `markDelivered` takes per call.
    public static let maxDelivered = 10_000

    /// Records that devices got these pings; returns how many waiting requests it marked.
    @discardableResult
    public func markDelivered(_ ids: [UUID]) async throws -> Int {
        try await pool.send("select relay.mark_delivered($1)", [ids]).scalar(Int.self)
    }

    /// Settles a request with a phone's answer (first answer wins). `instance`, the caller,
    /// is not notified: it delivers the answer and cancels its own pings itself. Under load
    /// it goes with others in one `relay.settle_many` call.
    public func settle(id: UUID, user: UUID, device: UUID?, answer: PhoneAnswer, instance: String) async throws -> RelayStatus.Settle {
        try await settles.call(SettleCall(id: id, user: user, device: device, answer: answer, instance: instance))
    }

    /// What `finish` found.
    public typealias Finished = RelayRows.Finished

    /// Ends a request this instance waits for: `expired` at the deadline, `abandoned` when
    /// the agent hung up (NOTIFY whereabot_cancel).
    public func finish(id: UUID, instance: String, abandoned: Bool) async throws -> Finished {
        let json = try await pool.send("select relay.finish($1, $2, $3)",
                                        [id, instance, (abandoned ? RelayStatus.Outcome.abandoned : .expired).rawValue])
            .scalar(PGJSON.self).parsed()
        return Finished(status: try Self.status(json, "status", from: "finish"), delivered: json["delivered"]?.bool,
                        outcome: try Self.optionalStatus(json["outcome"]?.string, from: "finish"), reason: json["reason"]?.string)
    }

    /// The row behind one of a waiter's requests, for resync.
    public typealias RequestState = RelayRows.RequestState

    /// The most ids `requestStates` takes per call (`relay.request_states` refuses more).
    public static let maxRequestStates = 10_000
    /// The most ids `requestReplay` takes per call.
    public static let maxReplays = 1_000

    /// The rows of the given requests; ids missing from the result have vanished (crash).
    public func requestStates(_ ids: [UUID]) async throws -> [RequestState] {
        try await pool.send("select id, settled, outcome, reason, delivered from relay.request_states($1)", [ids]).rows.map {
            RequestState(id: try $0.decode(0, as: UUID.self), settled: try $0.decode(1, as: Bool.self),
                         outcome: try Self.optionalStatus($0.decode(2, as: String?.self), from: "request_states"),
                         reason: try $0.decode(3, as: String?.self),
                         delivered: try $0.decode(4, as: Bool.self))
        }
    }

    /// Asks the sealers of `instance`'s location-settled requests to send their answers
    /// again (NOTIFY whereabot_replay); returns how many were asked for.
    @discardableResult
    public func requestReplay(_ ids: [UUID], instance: String) async throws -> Int {
        try await pool.send("select relay.request_replay($1, $2)", [ids, instance]).scalar(Int.self)
    }

    /// Re-sends a sealed answer to its waiter; false unless the request settled with a location.
    @discardableResult
    public func replayAnswer(id: UUID, sealed: String) async throws -> Bool {
        try await pool.send("select relay.replay_answer($1, $2)", [id, sealed]).scalar(Bool.self)
    }

    /// Pings still waiting for users with a socket on `instance`, with their owners.
    public func pendingLocates(on instance: String) async throws -> [(owner: UUID, ping: LocateMessage)] {
        try await pool.send("select owner_id, message from relay.pending_locates_on($1)", [instance]).rows.map {
            guard let ping = LocateMessage(json: try $0.decode(1, as: PGJSON.self).parsed()) else {
                throw Self.malformed("pending_locates_on")
            }
            return (try $0.decode(0, as: UUID.self), ping)
        }
    }

    /// The waiter's reply key for a request still waiting for `user`'s phones, else nil.
    public func replyKey(request: UUID, user: UUID) async throws -> [UInt8]? {
        try await pool.send("select relay.reply_key($1, $2)", [request, user]).scalar(Data?.self).map(Array.init)
    }

    // MARK: Sharing

    /// The owners sharing with `viewer` whose email or name is `person`.
    public func resolvePerson(viewer: UUID, person: String) async throws -> [Person] {
        try await pool.send("select owner_id, name, email from relay.resolve_person($1, $2)", [viewer, person]).rows.map {
            Person(userID: try $0.decode(0, as: UUID.self), name: try $0.decode(1, as: String.self), email: try $0.decode(2, as: String.self))
        }
    }

    /// The people sharing their location with `viewer`, by name.
    public func peopleSharing(with viewer: UUID) async throws -> [Person] {
        try await pool.send("select owner_id, name, email from relay.people_sharing_with($1)", [viewer]).rows.map {
            Person(userID: try $0.decode(0, as: UUID.self), name: try $0.decode(1, as: String.self), email: try $0.decode(2, as: String.self))
        }
    }

    // MARK: Credentials

    /// The owner of a live agent key.
    public struct AgentKeyOwner: Sendable, Equatable {
        /// The user the key acts for.
        public let userID: UUID
        /// The key's id (its revocation notifies `whereabot_key` with it).
        public let keyID: UUID
        /// The key's name, shown as the agent's name.
        public let keyName: String
        /// The owner's email, for the 503 text.
        public let email: String?
    }

    /// Looks up an agent key by its SHA-256 (hex); nil when unknown or revoked.
    public func agentKeyOwner(keyHash: String) async throws -> AgentKeyOwner? {
        guard let row = try await pool.send("select * from relay.agent_key_owner($1)", [keyHash]).first else { return nil }
        return AgentKeyOwner(userID: try row.decode("user_id", as: UUID.self), keyID: try row.decode("key_id", as: UUID.self),
                             keyName: try row.decode("key_name", as: String.self), email: try row.decode("email", as: String?.self))
    }

    /// The secret agent keys are signed with (`AgentKey.isSigned`).
    public func agentKeySecret() async throws -> [UInt8] {
        let secret = try await pool.send("select relay.agent_key_secret()").scalar(Data.self)
        guard secret.count == 32 else { throw Self.malformed("agent_key_secret") }
        return Array(secret)
    }

    /// Session checks one `sessionStates` call takes (the function's own limit).
    public static let maxSessionChecks = 1000

    /// The state of each (session, user) pair, in order.
    public func sessionStates(_ pairs: [(session: UUID, user: UUID)]) async throws -> [RelayStatus.Session] {
        precondition(pairs.count <= Self.maxSessionChecks, "at most \(Self.maxSessionChecks) pairs per call")
        let states = try await pool.send("select relay.session_states($1, $2)", [pairs.map(\.session), pairs.map(\.user)])
            .scalar([String].self)
        guard states.count == pairs.count else { throw Self.malformed("session_states") }
        return try states.map { try Self.status($0, from: "session_states") }
    }

    /// Removes and returns this instance's sockets whose session is gone or revoked or
    /// whose device was removed (asked at every heartbeat).
    public func revokedConnections(on instance: String) async throws -> [UUID] {
        try await pool.send("select relay.revoked_connections($1)", [instance]).rows.map { try $0.decode(0, as: UUID.self) }
    }

    /// Deletes up to `limit` revoked-session rows whose session has ended.
    @discardableResult
    public func forgetEndedSessions(limit: Int = 1_000) async throws -> Int {
        try await pool.send("select relay.forget_ended_sessions($1)", [limit]).scalar(Int.self)
    }

    /// The registered name of an OAuth client, if any.
    public func clientName(_ clientID: String) async throws -> String? {
        try await pool.send("select relay.client_name($1)", [clientID]).scalar(String?.self)
    }
}

extension PGJSON {
    /// The JSON parsed by the relay's own parser (no Codable per call).
    func parsed() throws -> JSONValue {
        guard let json = JSONValue.parse(text) else { throw PGError(.decoding, detail: "not JSON") }
        return json
    }
}
