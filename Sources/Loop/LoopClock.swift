import Foundation
import Synchronization

/// Where an event loop reads the time. Everything on a loop that waits — its timers, its
/// owners' deadlines, the servers' and database clients' timeouts — reads `EventLoop.now`,
/// so a loop on a manual clock lets tests move time forward (`EventLoop.advance(by:)`)
/// instead of sleeping through it.
public enum LoopClock: Sendable {
    /// The system's monotonic clock (`ContinuousClock`): what a running relay uses.
    case continuous
    /// Time that stands still until `EventLoop.advance(by:)` moves it; it starts at the
    /// continuous clock's now when the loop is made.
    case manual
}

/// The reading of a loop's clock.
final class LoopClockReading: Sendable {
    /// Whether time moves only when told to.
    let isManual: Bool
    /// The manual clock's now (unused on the continuous clock).
    private let manualNow = Mutex(ContinuousClock.now)
    /// Where a manual clock started, on both clocks: its wall time moves with it.
    private let start = (instant: ContinuousClock.now, date: Date())

    init(_ clock: LoopClock) {
        switch clock {
        case .continuous: isManual = false
        case .manual: isManual = true
        }
    }

    /// Now, on this clock.
    var now: ContinuousClock.Instant { isManual ? manualNow.withLock { $0 } : ContinuousClock.now }

    /// The wall-clock time now, on this clock: the system's on the continuous clock; on a
    /// manual one, the wall time it started at moved on as far as the clock was.
    var date: Date {
        guard isManual else { return Date() }
        let elapsed = (manualNow.withLock { $0 } - start.instant).components
        return start.date.addingTimeInterval(Double(elapsed.seconds) + Double(elapsed.attoseconds) * 1e-18)
    }

    /// Moves a manual clock forward; returns the new now.
    func advance(by duration: Duration) -> ContinuousClock.Instant {
        precondition(isManual, "advance(by:) needs a loop on LoopClock.manual")
        return manualNow.withLock { now in
            now = now + max(.zero, duration)
            return now
        }
    }
}
