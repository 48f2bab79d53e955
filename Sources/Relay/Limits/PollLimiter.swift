import Foundation
import Synchronization

/// Polls of durable requests (HTTP GET, `tasks/get`, `tasks/result`, a resumed call):
///
/// - at most 2 a second per request and credential, with a burst of 2, so a client polling
///   at the advertised interval (2 s) never meets it;
/// - polls of ids unknown to the credential (never opened, another's, forgotten) spend a
///   budget per credential (`unknownBurst`, then `unknownPerSecond`): past it the credential
///   gets Retry-After before any database read, so random well-formed ids are no free reads;
/// - polls that wait are bounded (`polling(_:by:wait:_:)`): one waiting poll per request
///   and credential, `maximumWaitingPerCredential` per credential and
///   `maximumWaitingPerAccount` per account at once. A poll past a bound is answered at
///   once with what the request is now (as `wait_secs=0`), never held.
///
/// Bounded like every `TokenBuckets`; the waiting counts hold only polls in progress.
final class PollLimiter: Sendable {
    /// Polls of unknown ids a credential may make at once.
    static let unknownBurst: Double = 20
    /// Polls of unknown ids refilled per second per credential.
    static let unknownPerSecond: Double = 1
    /// Polls of one credential that may wait at once (a credential has at most 20 open
    /// durable requests).
    static let maximumWaitingPerCredential = 20
    /// Polls of one account (all its agents) that may wait at once.
    static let maximumWaitingPerAccount = 50

    private struct Waiting {
        var byCredential: [String: Int] = [:]
        var byAccount: [UUID: Int] = [:]
        var requests: Set<String> = []
    }

    private let buckets: Mutex<TokenBuckets>
    private let unknown: Mutex<TokenBuckets>
    private let waiting = Mutex(Waiting())
    /// Where the buckets' refills are timed (the instance's clock).
    private let clock: RelayClock

    init(capacity: Int = TokenBuckets.defaultCapacity, clock: RelayClock = .system) {
        buckets = Mutex(TokenBuckets(burst: 2, perSecond: 2, capacity: capacity))
        unknown = Mutex(TokenBuckets(burst: Self.unknownBurst, perSecond: Self.unknownPerSecond, capacity: capacity))
        self.clock = clock
    }

    /// Takes a poll of request `token` by `binding`: nil when allowed, else the seconds to
    /// wait (Retry-After) — the request's own rate, or the credential's budget of unknown ids.
    func take(_ token: RequestToken, by binding: RelayDatabase.Binding) -> Int? {
        let now = clock.date.timeIntervalSince1970
        let spent = unknown.withLock { $0.retryAfter(Self.credential(binding), now: now) }
        if spent > 0 { return spent }
        let key = Self.credential(binding) + "|\(token.id)"
        return buckets.withLock { buckets in
            let wait = buckets.retryAfter(key, now: now)
            if wait > 0 { return wait }
            buckets.record(key, now: now)
            return nil
        }
    }

    /// Runs `poll` with `wait`, or with no wait when the waiting bounds are reached, and
    /// counts an unknown answer against the credential's budget.
    func polling(_ token: RequestToken, by binding: RelayDatabase.Binding, wait: Duration,
                 _ poll: (Duration) async throws -> LocateService.Resumed) async rethrows -> LocateService.Resumed {
        let admitted = wait > .zero && admit(token, by: binding)
        defer { if admitted { release(token, by: binding) } }
        let resumed = try await poll(admitted ? wait : .zero)
        if case .unknown = resumed {
            let now = clock.date.timeIntervalSince1970
            unknown.withLock { $0.record(Self.credential(binding), now: now) }
        }
        return resumed
    }

    /// Polls waiting now (for tests and /metrics).
    var waitingCount: Int { waiting.withLock { $0.requests.count } }

    private func admit(_ token: RequestToken, by binding: RelayDatabase.Binding) -> Bool {
        let credential = Self.credential(binding)
        let request = credential + "|\(token.id)"
        return waiting.withLock { waiting in
            guard !waiting.requests.contains(request),
                  waiting.byCredential[credential, default: 0] < Self.maximumWaitingPerCredential,
                  waiting.byAccount[binding.user, default: 0] < Self.maximumWaitingPerAccount else { return false }
            waiting.requests.insert(request)
            waiting.byCredential[credential, default: 0] += 1
            waiting.byAccount[binding.user, default: 0] += 1
            return true
        }
    }

    private func release(_ token: RequestToken, by binding: RelayDatabase.Binding) {
        let credential = Self.credential(binding)
        waiting.withLock { waiting in
            waiting.requests.remove(credential + "|\(token.id)")
            waiting.byCredential[credential]! -= 1
            if waiting.byCredential[credential] == 0 { waiting.byCredential[credential] = nil }
            waiting.byAccount[binding.user]! -= 1
            if waiting.byAccount[binding.user] == 0 { waiting.byAccount[binding.user] = nil }
        }
    }

    private static func credential(_ binding: RelayDatabase.Binding) -> String {
        "\(binding.user)|\(binding.clientID)|\(binding.keyID?.uuidString ?? "")"
    }
}
