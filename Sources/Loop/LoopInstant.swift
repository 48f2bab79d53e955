/// A `ContinuousClock.Instant` in 8 bytes rather than 16: whole nanoseconds from an instant
/// the process takes once. State kept per connection stores these (an idle phone's
/// connection carries several instants); the clock reads whole nanoseconds, so a
/// round trip loses nothing it measured.
public struct LoopInstant: Comparable, Hashable, Sendable {
    /// What every `LoopInstant` counts from (immutable, taken at first use).
    private static let origin = ContinuousClock.now

    private let nanoseconds: Int64

    /// `instant`, to the nanosecond.
    public init(_ instant: ContinuousClock.Instant) {
        let (seconds, attoseconds) = (instant - Self.origin).components
        nanoseconds = seconds * 1_000_000_000 + attoseconds / 1_000_000_000
    }

    /// The instant it stands for.
    public var instant: ContinuousClock.Instant { Self.origin + .nanoseconds(nanoseconds) }

    public static func < (lhs: LoopInstant, rhs: LoopInstant) -> Bool { lhs.nanoseconds < rhs.nanoseconds }
}
