import Foundation

/// One reading of the instance's clock, taken once per event: the instant on the loop's
/// monotonic clock, which every wait and timer of the value is measured on, and the
/// wall-clock time of that same instant, for the deadlines that come from outside the
/// process as wall-clock times (a ping's `expires_ms`, a credential's `exp`) and the times
/// that leave it (JSON, SQL). Relay's `RelayClock` is the only place that reads either; the
/// value never reads a clock.
package struct Moment: Sendable, Equatable {
    /// The instant, on the loop's clock.
    package let instant: ContinuousClock.Instant
    /// The wall-clock time at `instant`.
    package let date: Date

    /// A reading of `instant` and the wall time `date` at it.
    package init(instant: ContinuousClock.Instant, date: Date) {
        self.instant = instant
        self.date = date
    }
}
