import Synchronization

/// When an instance's drain ends: fixed by `RelayService.shutdown(drainTimeout:)`, or — for a
/// stop no shutdown asked for (a service that ended early) — by the first step of the stop
/// that reads it, `RelayService.defaultDrainTimeout` from then. The drain and the server's
/// stop both read it.
final class DrainDeadline: Sendable {
    private let deadline = Mutex<ContinuousClock.Instant?>(nil)

    /// The deadline: `timeout` after `now` unless it was fixed before.
    func fix(after timeout: Duration, now: ContinuousClock.Instant) -> ContinuousClock.Instant {
        deadline.withLock { deadline in
            let fixed = deadline ?? now + timeout
            deadline = fixed
            return fixed
        }
    }
}
