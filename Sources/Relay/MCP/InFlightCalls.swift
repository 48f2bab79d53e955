import Foundation
import JSON
import RelayCore
import Synchronization

/// The tool calls running on this instance by their JSON-RPC id, per credential, so that
/// `notifications/cancelled` (an explicit cancel) can withdraw the request a call waits
/// for. Stateless MCP has no session: a cancel names the id its client gave the call, and
/// only the same credential's cancel finds it. Bounded; an entry ends with its call.
final class InFlightCalls: Sendable {
    private struct Key: Hashable {
        let user: UUID
        let clientID: String
        let keyID: UUID?
        /// The JSON-RPC id as its JSON text (a string and a number never collide).
        let id: String
    }

    /// Calls remembered at once (each holds an HTTP request open).
    static let maximumEntries = 20_000

    private let calls = Mutex<[Key: RequestToken]>([:])

    private static func key(_ id: JSONValue, _ agent: AgentIdentity) -> Key? {
        guard !id.isNull else { return nil }
        let text = String(decoding: id.bytes, as: UTF8.self)
        guard text.utf8.count <= 256 else { return nil }
        return Key(user: agent.userID, clientID: agent.clientID, keyID: agent.keyID, id: text)
    }

    /// Call `id` of `agent` waits for request `token`.
    func begin(_ id: JSONValue, token: RequestToken, for agent: AgentIdentity) {
        guard let key = Self.key(id, agent) else { return }
        calls.withLock { calls in
            guard calls.count < Self.maximumEntries || calls[key] != nil else { return }
            calls[key] = token
        }
    }

    /// Call `id` of `agent` has ended.
    func end(_ id: JSONValue, for agent: AgentIdentity) {
        guard let key = Self.key(id, agent) else { return }
        _ = calls.withLock { $0.removeValue(forKey: key) }
    }

    /// The request call `id` of `agent` waits for, if it runs here.
    func token(of id: JSONValue, for agent: AgentIdentity) -> RequestToken? {
        guard let key = Self.key(id, agent) else { return nil }
        return calls.withLock { $0[key] }
    }
}
