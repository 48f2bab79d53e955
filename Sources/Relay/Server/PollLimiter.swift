import Foundation
import Synchronization

/// Polls of one durable request by one credential (HTTP GET, `tasks/get`, `tasks/result`,
/// a resumed call): at most 2 a second, with a burst of 2, so a client polling at the
/// advertised interval (2 s) never meets it. Bounded like every `TokenBuckets`.
final class PollLimiter: Sendable {
    private let buckets: Mutex<TokenBuckets>
    private let clock: @Sendable () -> Date

    init(capacity: Int = TokenBuckets.defaultCapacity, clock: @escaping @Sendable () -> Date = Date.init) {
        buckets = Mutex(TokenBuckets(burst: 2, perSecond: 2, capacity: capacity))
        self.clock = clock
    }

    /// Takes a poll of request `token` by `binding`: nil when allowed, else the seconds to
    /// wait (Retry-After).
    func take(_ token: RequestToken, by binding: RelayDatabase.Binding) -> Int? {
        let key = "\(binding.user)|\(binding.clientID)|\(binding.keyID?.uuidString ?? "")|\(token.id)"
        let now = clock().timeIntervalSince1970
        return buckets.withLock { buckets in
            let wait = buckets.retryAfter(key, now: now)
            if wait > 0 { return wait }
            buckets.record(key, now: now)
            return nil
        }
    }
}
