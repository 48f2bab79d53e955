import Foundation
import JSON
import Lifecycle
import PGBus
import RelayCore

/// The opens and settles an instance makes while others are in flight go to Postgres as one
/// call (`relay.open_requests`, `relay.settle_many`): see `CallCoalescer`. A lone call is
/// the single function, as before.
extension RelayDatabase {
    /// Calls of one kind in flight at once, per pool.
    static let callsInFlight = 2
    /// Elements one batched call takes (the functions' own limit).
    static let maxBatch = 32

    /// One `openRequest` call's arguments.
    struct OpenCall: Sendable {
        let id: UUID, owner: UUID, clientID: String, clientName: String?
        let instance: String, replyKey: [UInt8], expiresAt: Date, maxWaiting: Int, reason: String?

        /// The element of `relay.open_requests`' argument.
        var json: String {
            var object = JSONText()
            object.string("id", UUIDText.lowercase(id))
            object.string("owner", UUIDText.lowercase(owner))
            object.string("client_id", clientID)
            object.string("client_name", clientName)
            object.string("reply_key", Data(replyKey).base64EncodedString())
            object.number("expires_at", expiresAt.timeIntervalSince1970)
            object.integer("max_waiting", Int64(maxWaiting))
            object.string("reason", reason)
            return object.object
        }
    }

    /// One `settle` call's arguments.
    struct SettleCall: Sendable {
        let id: UUID, user: UUID, device: UUID?, answer: PhoneAnswer, instance: String

        /// The element of `relay.settle_many`' argument.
        var json: String {
            var object = JSONText()
            object.string("id", UUIDText.lowercase(id))
            object.string("user", UUIDText.lowercase(user))
            object.string("device", device.map(UUIDText.lowercase))
            object.string("outcome", answer.outcome.rawValue)
            object.string("reason", answer.reason)
            object.string("sealed", answer.sealed)
            return object.object
        }
    }

    static func openCoalescer(_ pool: PGPool, tasks: OwnedTasks) -> CallCoalescer<OpenCall, Opened> {
        let single: CallCoalescer<OpenCall, Opened>.Single = { call in try await openOne(pool, call, requester: nil) }
        return CallCoalescer(maximumInFlight: callsInFlight, maximumBatch: maxBatch, tasks: tasks, single: single, batch: { calls in
            try await byInstance(calls, \.instance) { instance, calls in
                let results = try await batchCall(pool, "select relay.open_requests($1, $2::jsonb)", instance,
                                                  calls.map(\.json), function: "open_requests")
                return try await alone(calls, results, single) { try opened($0, function: "open_requests") }
            }
        })
    }

    static func settleCoalescer(_ pool: PGPool, remindAfter: Int?, tasks: OwnedTasks) -> CallCoalescer<SettleCall, RelayStatus.Settle> {
        let remind: (any PGEncodable)? = remindAfter
        let single: CallCoalescer<SettleCall, RelayStatus.Settle>.Single = { call in
            let status = try await pool.send("select relay.settle($1, $2, $3, $4, $5, $6, $7, $8)",
                                              [call.id, call.user, call.device, call.answer.outcome.rawValue,
                                               call.answer.reason, call.answer.sealed, call.instance, remind]).scalar(String.self)
            return try Self.status(status, from: "settle")
        }
        return CallCoalescer(maximumInFlight: callsInFlight, maximumBatch: maxBatch, tasks: tasks, single: single, batch: { calls in
            try await byInstance(calls, \.instance) { instance, calls in
                let results = try await batchCall(pool, "select relay.settle_many($1, $2::jsonb, $3)", instance,
                                                  calls.map(\.json), extra: [remind], function: "settle_many")
                return try await alone(calls, results, single) { try Self.status($0, "status", from: "settle_many") }
            }
        })
    }

    /// Decodes a batch's results; an element the batch gave up on because a lock was held
    /// past its lock_timeout (55P03) is made alone, with the single function, which waits.
    private static func alone<Call, Output>(_ calls: [Call], _ results: [Result<JSONValue, any Error>],
                                            _ single: (Call) async throws -> Output,
                                            decode: (JSONValue) throws -> Output) async throws -> [Result<Output, any Error>] {
        var decoded: [Result<Output, any Error>] = []
        decoded.reserveCapacity(results.count)
        for (call, result) in zip(calls, results) {
            switch result {
            case .success(let json):
                decoded.append(Result { try decode(json) })
            case .failure(let error as PGError) where error.sqlState == lockNotAvailable:
                do { decoded.append(.success(try await single(call))) } catch { decoded.append(.failure(error)) }
            case .failure(let error):
                decoded.append(.failure(error))
            }
        }
        return decoded
    }

    /// The SQLSTATE of a lock not taken within lock_timeout.
    static let lockNotAvailable = "55P03"

    /// One `relay.open_request` call.
    static func openOne(_ pool: PGPool, _ call: OpenCall, requester: UUID?) async throws -> Opened {
        let json = try await pool.send("select relay.open_request($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)",
                                        [call.id, call.owner, requester, call.clientID, call.clientName, call.instance,
                                         Data(call.replyKey), call.expiresAt, call.maxWaiting, call.reason])
            .scalar(PGJSON.self).parsed()
        return try opened(json, function: "open_request")
    }

    /// Makes `body`'s call once per instance the calls name (one, in practice), keeping the
    /// calls' order in the results.
    private static func byInstance<Call, Output>(
        _ calls: [Call], _ instance: KeyPath<Call, String>,
        _ body: (String, [Call]) async throws -> [Result<Output, any Error>]) async throws -> [Result<Output, any Error>] {
        let first = calls[0][keyPath: instance]
        if calls.allSatisfy({ $0[keyPath: instance] == first }) { return try await body(first, calls) }
        var results = [Result<Output, any Error>?](repeating: nil, count: calls.count)
        for name in Set(calls.map { $0[keyPath: instance] }) {
            let indices = calls.indices.filter { calls[$0][keyPath: instance] == name }
            for (index, result) in zip(indices, try await body(name, indices.map { calls[$0] })) { results[index] = result }
        }
        return results.map { $0! }
    }

    /// A batched function's results: each element's JSON, or the server error it was
    /// refused with alone (`{"status": "error", "code": SQLSTATE}`).
    private static func batchCall(_ pool: PGPool, _ sql: String, _ instance: String, _ elements: [String],
                                  extra: [(any PGEncodable)?] = [],
                                  function: String) async throws -> [Result<JSONValue, any Error>] {
        let argument = "[" + elements.joined(separator: ",") + "]"
        let json = try await pool.send(sql, [instance, argument] + extra).scalar(PGJSON.self).parsed()
        guard case .array(let results) = json, results.count == elements.count else { throw malformed(function) }
        return results.map { result in
            guard result["status"]?.string == "error" else { return .success(result) }
            return .failure(PGError(.server, sqlState: result["code"]?.string))
        }
    }
}
