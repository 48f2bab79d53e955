import Foundation
import HTTPServer

/// Failed authentications counted per client address at every prefix an attacker could fill
/// with addresses (`AddressBudget.keys(for:)`): an IPv4 address as itself; an IPv6 one by
/// its /64, its /56 and its /48, each wider prefix with a budget twice the one inside it.
/// So a routed /56 or /48 gets its own budget once, not one per /64 in it: from a /48, at
/// most 4 × 20 failures at once and 4 × 2 a second after that.
///
/// A value type driven by its owner with an injected clock; bounded, as every `TokenBuckets`.
struct FailureBudget: Sendable {
    /// One set of buckets per prefix length, narrowest first.
    private var levels: [TokenBuckets]

    init(burst: Double = TokenBuckets.defaultBurst, perSecond: Double = TokenBuckets.defaultPerSecond,
         capacity: Int = TokenBuckets.defaultCapacity) {
        levels = AddressBudget.prefixLengths.indices.map { level in
            let scale = Double(1 << level)
            return TokenBuckets(burst: burst * scale, perSecond: perSecond * scale, capacity: capacity)
        }
    }

    /// Seconds until `address` may fail again (0: it may now): the longest wait of its prefixes.
    func retryAfter(_ address: String, now: TimeInterval) -> Int {
        zip(AddressBudget.keys(for: address), levels).map { key, buckets in buckets.retryAfter(key, now: now) }.max() ?? 0
    }

    /// Counts one failure of `address` at each of its prefixes.
    mutating func record(_ address: String, now: TimeInterval) {
        for (level, key) in AddressBudget.keys(for: address).enumerated() { levels[level].record(key, now: now) }
    }

    /// Keys tracked now, over every prefix length.
    var count: Int { levels.reduce(0) { $0 + $1.count } }
}
