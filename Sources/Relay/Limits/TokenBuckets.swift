import Foundation

/// Token buckets by key: each key may act `burst` times at once and `perSecond` times a
/// second after that. The `Authenticator` counts failed authentications per client address
/// with them (an address over its budget gets 429 with Retry-After, so random keys cannot
/// turn into database round trips); `PollLimiter` counts polls per request and credential.
///
/// A value type driven by its owner with an injected clock. Bounded: at most `capacity`
/// keys are tracked; when full, keys whose bucket is full again are dropped, and if none
/// is, the oldest entries go.
struct TokenBuckets: Sendable {
    /// Failed authentications allowed at once per address.
    static let defaultBurst: Double = 20
    /// Failed authentications refilled per second per address.
    static let defaultPerSecond: Double = 2
    /// Keys tracked at most.
    static let defaultCapacity = 10_000

    private struct Bucket {
        var tokens: Double
        var updated: TimeInterval
    }

    private let burst: Double
    private let perSecond: Double
    private let capacity: Int
    private var buckets: [String: Bucket] = [:]

    init(burst: Double = TokenBuckets.defaultBurst, perSecond: Double = TokenBuckets.defaultPerSecond,
         capacity: Int = TokenBuckets.defaultCapacity) {
        self.burst = burst
        self.perSecond = perSecond
        self.capacity = capacity
    }

    /// Seconds until `address` may act again (0: it may now).
    func retryAfter(_ address: String, now: TimeInterval) -> Int {
        guard let bucket = buckets[address] else { return 0 }
        let tokens = min(burst, bucket.tokens + (now - bucket.updated) * perSecond)
        return tokens >= 1 ? 0 : Int(((1 - tokens) / perSecond).rounded(.up))
    }

    /// Takes one token of `address`.
    mutating func record(_ address: String, now: TimeInterval) {
        var bucket = buckets[address] ?? Bucket(tokens: burst, updated: now)
        bucket.tokens = max(0, min(burst, bucket.tokens + (now - bucket.updated) * perSecond) - 1)
        bucket.updated = now
        if buckets[address] == nil, buckets.count >= capacity { evict(now: now) }
        buckets[address] = bucket
    }

    /// Keys tracked now.
    var count: Int { buckets.count }

    private mutating func evict(now: TimeInterval) {
        buckets = buckets.filter { $0.value.tokens + (now - $0.value.updated) * perSecond < burst }
        if buckets.count >= capacity {
            let oldest = buckets.sorted { $0.value.updated < $1.value.updated }.prefix(capacity / 10 + 1).map(\.key)
            for key in oldest { buckets[key] = nil }
        }
    }
}
