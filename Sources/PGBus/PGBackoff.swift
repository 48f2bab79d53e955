/// Capped exponential backoff with jitter, for reconnecting.
///
/// Attempt n waits between half and all of `min(maximum, initial * 2^n)`, so a fleet of
/// instances that lost the database together does not reconnect in lockstep.
public struct PGBackoff: Sendable {
    /// The base delay of the first retry.
    public var initial: Duration
    /// The largest delay.
    public var maximum: Duration

    /// About 1 s for the first retry, growing to 30 s.
    public static let standard = PGBackoff(initial: .seconds(1), maximum: .seconds(30))

    /// Creates a backoff policy.
    public init(initial: Duration, maximum: Duration) {
        self.initial = initial
        self.maximum = maximum
    }

    /// The delay before retry number `attempt` (0 for the first), given a random fraction
    /// in 0...1 (injected so tests are deterministic).
    public func delay(attempt: Int, random: Double) -> Duration {
        var base = initial
        for _ in 0..<min(attempt, 32) where base < maximum { base *= 2 }
        if base > maximum { base = maximum }
        return base / 2 + base / 2 * min(max(random, 0), 1)
    }
}
