import Foundation
import Loop
import RelayCore

/// The instance's one clock: the only place in Relay that reads the time. It reads the
/// instance's event loop (`EventLoop.now`, `EventLoop.date`), so a test on a loop with a
/// manual clock moves every part's time — the value's, the timers', the tokens' — by
/// moving the loop (`RelayService.advance(by:)`); without a loop (unit tests of one part)
/// it reads the system's clocks.
///
/// `instant` is for waits and timeouts measured inside the process; `date` only where a
/// time leaves it or comes from outside (JSON, SQL, logs, a JWT's `exp`).
package struct RelayClock: Sendable {
    /// The loop whose clock this reads; nil: the system's clocks.
    package let loop: EventLoop?

    /// A clock reading `loop`'s time (nil: the system's).
    package init(loop: EventLoop?) {
        self.loop = loop
    }

    /// The system's clocks (parts that run without a loop).
    package static let system = RelayClock(loop: nil)

    /// Now, on the monotonic clock.
    package var instant: ContinuousClock.Instant { loop?.now ?? ContinuousClock.now }

    /// Now, on the wall clock.
    package var date: Date { loop?.date ?? Date() }

    /// Both, read together (one per event of the instance's value).
    package var now: Moment { Moment(instant: instant, date: date) }
}
