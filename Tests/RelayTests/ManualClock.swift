import Foundation
import Loop
@testable import Relay

/// A relay clock that stands still until the test moves it: the clock of an event loop on
/// `LoopClock.manual`, as an instance's is in tests, so a part under test reads the time
/// the way it does in a relay.
final class ManualClock: Sendable {
    private let loop: EventLoop
    /// The clock the part under test reads.
    let relay: RelayClock

    init() throws {
        loop = try EventLoop.start(name: "manual-clock", clock: .manual)
        relay = RelayClock(loop: loop)
    }

    deinit { loop.stop() }

    /// Moves the clock on by `seconds`.
    func advance(_ seconds: TimeInterval) async {
        await loop.advance(by: .nanoseconds(Int64(seconds * 1e9)))
    }
}
