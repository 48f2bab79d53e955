import Foundation
import RelayCore
import Synchronization

/// The requests an agent's repeated ask joins instead of opening another (docs/agents.md,
/// "Timeouts"): one per (credential, person) — the credential's user, client and agent
/// key, and whose phone — while it waits for the person, or has settled and its outcome
/// has not yet reached a call. Held by the instance whose call opened the request (it
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

    private struct Entry {
        let token: RequestToken
        let keepUntil: Date
    }

    private let entries = Mutex<[Key: Entry]>([:])
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

    /// The request `key` may join at `now`, if one is remembered and not past its TTL.
    func token(for key: Key, now: Date) -> RequestToken? {
        entries.withLock { entries in
            guard let entry = entries[key] else { return nil }
            guard entry.keepUntil > now else {
                entries[key] = nil
                return nil
            }
            return entry.token
        }
    }

    /// Remembers `token` as `key`'s request until `keepUntil` (its result TTL; `now`: to
    /// drop the expired when full).
    func remember(_ token: RequestToken, for key: Key, until keepUntil: Date, now: Date) {
        entries.withLock { entries in
            if entries.count >= Self.maximumEntries {
                entries = entries.filter { $0.value.keepUntil > now }
                if entries.count >= Self.maximumEntries { entries.removeAll() }
            }
            entries[key] = Entry(token: token, keepUntil: keepUntil)
        }
    }

    /// Forgets `key`'s request `token` (its outcome reached a call, or it ended unjoinable);
    /// a newer request of the key stays.
    func forget(_ token: RequestToken, for key: Key) {
        entries.withLock { entries in
            if entries[key]?.token.id == token.id { entries[key] = nil }
        }
    }

    /// Forgets request `token` whoever asked it: its outcome reached a call through its
    /// request_id or task (a poll, `tasks/get`, `tasks/result`), so the next ask is a new one.
    func forget(_ token: RequestToken) {
        entries.withLock { entries in
            guard let key = entries.first(where: { $0.value.token.id == token.id })?.key else { return }
            entries[key] = nil
        }
    }

    /// Requests remembered now (for tests).
    var count: Int { entries.withLock { $0.count } + synchronous.withLock { $0.count } }
}
