import Loop
import Testing

/// `LoopInstant` keeps an instant in 8 bytes and gives back the same instant, to the
/// nanosecond the clock reads, before and after the instant it counts from, in order.
@Suite struct LoopInstantTests {
    @Test func itIsEightBytesAndRoundTripsExactly() {
        #expect(MemoryLayout<LoopInstant>.size == 8)
        let now = ContinuousClock.now
        let offsets: [Duration] = [.zero, .nanoseconds(1), .nanoseconds(-1), .milliseconds(1500), .seconds(-86_400),
                                   .seconds(365 * 86_400), .nanoseconds(123_456_789_012)]
        for offset in offsets {
            #expect(LoopInstant(now + offset).instant == now + offset, "\(offset)")
        }
    }

    @Test func itKeepsTheOrderOfInstants() {
        let now = ContinuousClock.now
        let instants = [now - .seconds(3600), now - .nanoseconds(1), now, now + .nanoseconds(1), now + .seconds(60)]
        let compact = instants.map(LoopInstant.init)
        #expect(compact == compact.sorted())
        #expect(Set(compact).count == instants.count)
        #expect(LoopInstant(now) == LoopInstant(now))
    }
}
