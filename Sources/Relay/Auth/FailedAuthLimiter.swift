import Foundation

/// Failed authentications per client address, as token buckets: each address may fail
/// `burst` times at once and `perSecond` times a second after that. An address over its
/// budget gets 429 with Retry-After for any credential that would cost a database lookup
/// or fails, so random keys cannot turn into database round trips.
///
/// A value type driven by its owner (the `Authenticator` actor) with an injected clock.
/// Bounded: at most `capacity` addresses are tracked; when full, addresses whose bucket is
/// full again are dropped, and if none is, the oldest entries go.
struct FailedAuthLimiter: Sendable {
    /// Failures allowed at once per address.
    static let defaultBurst: Double = 20
    /// Failures refilled per second per address.
    static let defaultPerSecond: Double = 2
    /// Addresses tracked at most.
    static let defaultCapacity = 10_000

    private struct Bucket {
        var tokens: Double
        var updated: TimeInterval
    }

    private let burst: Double
    private let perSecond: Double
    private let capacity: Int
    private var buckets: [String: Bucket] = [:]

    init(burst: Double = FailedAuthLimiter.defaultBurst, perSecond: Double = FailedAuthLimiter.defaultPerSecond,
         capacity: Int = FailedAuthLimiter.defaultCapacity) {
        self.burst = burst
        self.perSecond = perSecond
        self.capacity = capacity
    }

    /// Seconds until `address` may fail again (0: it may now).
    func retryAfter(_ address: String, now: TimeInterval) -> Int {
        guard let bucket = buckets[address] else { return 0 }
        let tokens = min(burst, bucket.tokens + (now - bucket.updated) * perSecond)
        return tokens >= 1 ? 0 : Int(((1 - tokens) / perSecond).rounded(.up))
    }

    /// Records one failure of `address`.
    mutating func recordFailure(_ address: String, now: TimeInterval) {
        var bucket = buckets[address] ?? Bucket(tokens: burst, updated: now)
        bucket.tokens = max(0, min(burst, bucket.tokens + (now - bucket.updated) * perSecond) - 1)
        bucket.updated = now
        if buckets[address] == nil, buckets.count >= capacity { evict(now: now) }
        buckets[address] = bucket
    }

    /// Addresses tracked now.
    var count: Int { buckets.count }

    private mutating func evict(now: TimeInterval) {
        buckets = buckets.filter { $0.value.tokens + (now - $0.value.updated) * perSecond < burst }
        if buckets.count >= capacity {
            let oldest = buckets.sorted { $0.value.updated < $1.value.updated }.prefix(capacity / 10 + 1).map(\.key)
            for key in oldest { buckets[key] = nil }
        }
    }
}
