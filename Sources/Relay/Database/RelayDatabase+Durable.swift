import Foundation
import JSON
import PGBus
import RelayCore

/// The calls behind durable requests (docs/protocol.md, "Durable requests"): opening one bound to its credential,
/// polling, cancelling and listing it.
extension RelayDatabase {
    /// Who may see a durable request: the (user, client_id) of the credential that opened
    /// it, and the agent key when it was one.
    public struct Binding: Sendable, Equatable {
        /// The credential's user (the requester on shared requests).
        public let user: UUID
        /// The OAuth client id, or `agent-key`.
        public let clientID: String
        /// The agent key's id, for agent keys.
        public let keyID: UUID?

        /// The binding of an agent's credential.
        public init(_ agent: AgentIdentity) {
            user = agent.userID
            clientID = agent.clientID
            keyID = agent.keyID
        }
    }

    /// Opens a resumable request (`durable`: it outlives this instance from the start; else
    /// `makeDurable` follows at the call's wait bound).
    func openDurableRequest(id: UUID, owner: UUID, requester: UUID?, binding: Binding, clientName: String?,
                            instance: String, replyKey: [UInt8], expiresAt: Date, keepUntil: Date, durable: Bool,
                            wrappedSecret: [UInt8]?, maxWaiting: Int, reason: String? = nil) async throws -> Opened {
        let json = try await pool.send(
            "select relay.open_durable_request($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14)",
            [id, owner, requester, binding.clientID, clientName, binding.keyID, instance, Data(replyKey), expiresAt,
             keepUntil, durable, wrappedSecret.map { Data($0) }, maxWaiting, reason])
            .scalar(PGJSON.self).parsed()
        return try Self.opened(json, function: "open_durable_request")
    }

    /// What `makeDurable` found.
    func makeDurable(id: UUID, instance: String) async throws -> RelayStatus.MakeDurable {
        let json = try await pool.send("select relay.make_durable($1, $2)", [id, instance]).scalar(PGJSON.self).parsed()
        return try Self.status(json, "status", from: "make_durable")
    }

    /// A durable request as its credential sees it.
    public struct DurableState: Sendable, Equatable {
        /// The request's row id.
        public let id: UUID
        /// When it was opened, in microseconds since 1970 (tasks/list's cursor).
        public let createdMicroseconds: Int64
        /// Whose phones were asked.
        public let owner: UUID
        /// Nil while waiting; else how it ended.
        public let outcome: RelayStatus.Outcome?
        /// The reason, for denied and unavailable.
        public let reason: String?
        /// Whether a device got the ping (504 rather than 503 when it expired).
        public let delivered: Bool
        /// When it was opened, when the phone's answer is due, when it settled, and when it
        /// is forgotten.
        public let createdAt: Date, expiresAt: Date, settledAt: Date?, keepUntil: Date
        /// The fix, sealed to the request's reply key.
        public let sealed: String?

        /// Whether the person (or the deadline) has not decided yet.
        public var waiting: Bool { outcome == nil }
    }

    /// Polls a durable request; nil when it is unknown to `binding` (never opened, another
    /// credential's, or past its TTL). `watch`: its answer is sent to this instance too.
    func durableState(id: UUID, binding: Binding, instance: String, watch: Bool) async throws -> DurableState? {
        let json = try await pool.send("select relay.durable_state($1, $2, $3, $4, $5, $6)",
                                        [id, binding.user, binding.clientID, binding.keyID, instance, watch])
            .scalar(PGJSON.self).parsed()
        let poll: RelayStatus.Poll = try Self.status(json, "status", from: "durable_state")
        return poll == .unknown ? nil : try Self.durableState(json)
    }

    /// Cancels a durable request. `forget` deletes it and its result too.
    func cancelDurable(id: UUID, binding: Binding, forget: Bool) async throws -> RelayStatus.CancelDurable {
        try Self.status(try await pool.send("select relay.cancel_durable($1, $2, $3, $4, $5)",
                                                   [id, binding.user, binding.clientID, binding.keyID, forget]).scalar(String.self),
                               from: "cancel_durable")
    }

    /// One page of `binding`'s listable durable requests, newest first, after the cursor
    /// (created_at in microseconds, id); each with its wrapped secret.
    func durableRequests(binding: Binding, before: (Int64, UUID)?, limit: Int) async throws -> [(DurableState, [UInt8])] {
        try await pool.send("select view, wrapped_secret from relay.durable_requests($1, $2, $3, $4, $5, $6)",
                            [binding.user, binding.clientID, binding.keyID, before?.0, before?.1, limit]).rows.map {
            (try Self.durableState(try $0.decode(0, as: PGJSON.self).parsed()), Array(try $0.decode(1, as: Data.self)))
        }
    }

    /// `binding`'s newest get_phone_location request for `owner`'s phones still waiting for
    /// the person, with its request_id secret wrapped under REQUEST_ID_KEY: a repeated ask
    /// joins it from any instance (docs/agents.md, "Timeouts"). Nil when there is none.
    func joinableRequest(binding: Binding, owner: UUID) async throws -> (id: UUID, wrapped: [UInt8])? {
        guard let row = try await pool.send("select id, wrapped_secret from relay.joinable_request($1, $2, $3, $4)",
                                            [binding.user, binding.clientID, binding.keyID, owner]).rows.first else {
            return nil
        }
        return (try row.decode(0, as: UUID.self), Array(try row.decode(1, as: Data.self)))
    }

    private static func durableState(_ json: JSONValue) throws -> DurableState {
        func date(_ key: String) -> Date? { json[key]?.integer.map { Date(timeIntervalSince1970: Double($0) / 1000) } }
        guard let text = json["id"]?.string, let id = UUID(uuidString: text),
              let ownerText = json["owner"]?.string, let owner = UUID(uuidString: ownerText),
              let createdMicroseconds = json["created_us"]?.integer,
              let created = date("created_ms"), let expires = date("expires_ms"), let keep = date("keep_until_ms") else {
            throw malformed("durable_state")
        }
        return DurableState(id: id, createdMicroseconds: createdMicroseconds, owner: owner,
                            outcome: try Self.optionalStatus(json["outcome"]?.string, from: "durable_state"),
                            reason: json["reason"]?.string,
                            delivered: json["delivered"]?.bool ?? false, createdAt: created, expiresAt: expires,
                            settledAt: date("settled_ms"), keepUntil: keep, sealed: json["sealed"]?.string)
    }
}
