import Foundation
import RelayCore
import Synchronization

/// The requests an agent's repeated ask joins instead of opening another (docs/agents.md,
/// "Timeouts"): one per (credential, person) — the credential's user, client and agent
/// key, and whose phone — while it waits for the person, or has settled and its outcome
/// has not yet reached a call (or reached one a moment ago, when a call of it hung up: that
/// client may have dropped it). Held by the instance whose call opened the request (it
/// alone holds its request_id's secret); bounded, and entries end with their request's
/// result TTL.
final class JoinableRequests: Sendable {
    /// Whose request: the asking credential and whose phone it asks.
    struct Key: Hashable, Sendable {
        let user: UUID
        let clientID: String
        let keyID: UUID?
        let owner: UUID
    }

    /// The most requests remembered at once (each waits for a person: a user has at most
    /// 20 durable ones per credential, so this bounds memory, never the product).
    static let maximumEntries = 10_000

    /// How long an outcome handed to a call stays there for the next ask when a call of its
    /// request hung up: a client that timed out once may have dropped that answer too (it
    /// came in as its timeout ran out), and its retry gets it rather than a second prompt.
    static let redeliveryWindow: TimeInterval = 30

    private struct Entry {
        let token: RequestToken
        let keepUntil: Date
        /// A call of it hung up (its client times out).
        var hungUp = false
        /// When its outcome was handed to a call (nil: not yet).
        var handedOverAt: Date?

        /// Whether a repeated ask at `now` joins it: open (or settled and not yet handed
        /// over) and within its TTL; once handed over, only within the redelivery window of
        /// a request whose caller hung up.
        func joinable(now: Date) -> Bool {
            guard keepUntil > now else { return false }
            guard let handedOverAt else { return true }
            return hungUp && now.timeIntervalSince(handedOverAt) < JoinableRequests.redeliveryWindow
        }
    }

    private struct Entries {
        var byKey: [Key: Entry] = [:]
        /// Each entry's key by its request's id (a poll knows only the token).
        var keys: [UUID: Key] = [:]

        mutating func remove(_ key: Key) {
            guard let entry = byKey.removeValue(forKey: key) else { return }
            keys[entry.token.id] = nil
        }

        /// Changes the entry of request `id`, if remembered.
        mutating func update(_ id: UUID, _ change: (inout Entry) -> Void) {
            guard let key = keys[id], byKey[key] != nil else { return }
            change(&byKey[key]!)
        }
    }

    private let entries = Mutex(Entries())
    /// Synchronous requests (no request_id): their outcome, handed over in memory.
    private let synchronous = Mutex<[Key: SyncOutcome]>([:])

    /// The synchronous request `key` may join at `now`, if one is open (or settled and not
    /// yet received by anyone).
    func outcome(for key: Key, now: Date) -> SyncOutcome? {
        synchronous.withLock { outcomes in
            guard let outcome = outcomes[key] else { return nil }
            guard outcome.joinable(now: now) else {
                outcomes[key] = nil
                return nil
            }
            return outcome
        }
    }

    /// Remembers `outcome` as `key`'s synchronous request (`now`: to drop the unjoinable
    /// when full).
    func remember(_ outcome: SyncOutcome, for key: Key, now: Date) {
        synchronous.withLock { outcomes in
            if outcomes.count >= Self.maximumEntries {
                outcomes = outcomes.filter { $0.value.joinable(now: now) }
                if outcomes.count >= Self.maximumEntries { outcomes.removeAll() }
            }
            outcomes[key] = outcome
        }
    }

    /// Forgets `key`'s synchronous request `outcome` (its outcome reached a call).
    func forget(_ outcome: SyncOutcome, for key: Key) {
        synchronous.withLock { outcomes in
            if outcomes[key] === outcome { outcomes[key] = nil }
        }
    }

    /// The request `key` may join at `now`, if one is remembered and joinable.
    func token(for key: Key, now: Date) -> RequestToken? {
        entries.withLock { entries in
            guard let entry = entries.byKey[key] else { return nil }
            guard entry.joinable(now: now) else {
                entries.remove(key)
                return nil
            }
            return entry.token
        }
    }

    /// Remembers `token` as `key`'s request until `keepUntil` (its result TTL; `now`: to
    /// drop the unjoinable when full).
    func remember(_ token: RequestToken, for key: Key, until keepUntil: Date, now: Date) {
        entries.withLock { entries in
            if entries.byKey.count >= Self.maximumEntries {
                for (key, entry) in entries.byKey where !entry.joinable(now: now) { entries.remove(key) }
                if entries.byKey.count >= Self.maximumEntries { entries = Entries() }
            }
            entries.remove(key)
            entries.byKey[key] = Entry(token: token, keepUntil: keepUntil)
            entries.keys[token.id] = key
        }
    }

    /// Request `token`'s outcome went to a call at `now` (through a join, its request_id or
    /// its task): the next ask is a new one — unless a call of it hung up, when the next
    /// ask within `redeliveryWindow` gets the same outcome. `hungUp`: that call's own caller
    /// had left (the outcome reached nobody), so the request stays joinable as it was.
    func handedOver(_ token: RequestToken, now: Date, hungUp: Bool) {
        entries.withLock { entries in
            entries.update(token.id) { entry in
                // The window counts from the first call it reached: a client asking again and
                // again gets a new prompt once it has passed.
                if hungUp { entry.hungUp = true } else if entry.handedOverAt == nil { entry.handedOverAt = now }
            }
        }
    }

    /// A call of request `token` hung up (its client's timeout, a closed stream), before or
    /// just after its outcome was handed to it.
    func hungUp(_ token: RequestToken) {
        entries.withLock { entries in entries.update(token.id) { $0.hungUp = true } }
    }

    /// Forgets `key`'s request `token` (it ended unjoinable); a newer request of the key stays.
    func forget(_ token: RequestToken, for key: Key) {
        entries.withLock { entries in
            if entries.byKey[key]?.token.id == token.id { entries.remove(key) }
        }
    }

    /// Requests remembered now (for tests).
    var count: Int { entries.withLock { $0.byKey.count } + synchronous.withLock { $0.count } }
}
