import Foundation
import JSON
import RelayCore
import Synchronization

/// The tool calls running on this instance by their JSON-RPC id, per credential, so that
/// `notifications/cancelled` (an explicit cancel) can withdraw the request a call waits
/// for. Stateless MCP has no session: a cancel names the id its client gave the call, and
/// only the same credential's cancel finds it. A call that ended is remembered
/// `lateCancelWindow` more, for the courtesy cancel of a client whose timeout ran out as its
/// answer came (the answer never reached it). Bounded; an entry ends with its call, or
/// one to two windows after.
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

    /// How long a call is remembered after it ended, for a late cancel.
    static let lateCancelWindow: TimeInterval = 10

    private struct Ended {
        let token: RequestToken
        let at: Date
    }

    /// Calls that ended, in two generations of `lateCancelWindow` each: the older one is
    /// dropped whole as the next begins, so an idle entry costs nothing to expire.
    private struct EndedCalls {
        var current: [Key: Ended] = [:]
        var previous: [Key: Ended] = [:]
        var currentSince: Date?

        /// Makes `now`'s generation current: a generation `lateCancelWindow` old becomes the
        /// previous one (its calls may still be asked for), and an older one is dropped.
        mutating func turn(_ now: Date) {
            let window = InFlightCalls.lateCancelWindow
            if let since = currentSince, now.timeIntervalSince(since) < window { return }
            let recent = currentSince.map { now.timeIntervalSince($0) < 2 * window } ?? false
            previous = recent ? current : [:]
            current = [:]
            currentSince = now
        }
    }

    private let calls = Mutex<[Key: RequestToken]>([:])
    private let ended = Mutex(EndedCalls())

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

    /// Call `id` of `agent` has ended at `now`.
    func end(_ id: JSONValue, for agent: AgentIdentity, now: Date) {
        guard let key = Self.key(id, agent), let token = calls.withLock({ $0.removeValue(forKey: key) }) else { return }
        ended.withLock { ended in
            ended.turn(now)
            guard ended.current.count < Self.maximumEntries else { return }  // a flood: a late cancel finds less
            ended.current[key] = Ended(token: token, at: now)
        }
    }

    /// The request call `id` of `agent` waits for, if it runs here.
    func token(of id: JSONValue, for agent: AgentIdentity) -> RequestToken? {
        guard let key = Self.key(id, agent) else { return nil }
        return calls.withLock { $0[key] }
    }

    /// The request of call `id` of `agent`, running here or ended less than
    /// `lateCancelWindow` before `now`.
    func recentToken(of id: JSONValue, for agent: AgentIdentity, now: Date) -> RequestToken? {
        guard let key = Self.key(id, agent) else { return nil }
        if let token = calls.withLock({ $0[key] }) { return token }
        return ended.withLock { ended in
            guard let call = ended.current[key] ?? ended.previous[key],
                  now.timeIntervalSince(call.at) < Self.lateCancelWindow else { return nil }
            return call.token
        }
    }
}
