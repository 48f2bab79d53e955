@testable import Loop
import Testing

/// The loop's intrusive deadline heap: owners come out earliest first, a moved deadline
/// takes its new place, a cleared one never comes out, and every owner's slot stays the
/// index of its entry.
@Suite struct DeadlineHeapTests {
    final class Owner: LoopDeadlineOwner {
        var deadlineSlot = -1
        let name: Int
        init(_ name: Int) { self.name = name }
        func deadlineReached(now: ContinuousClock.Instant) {}
    }

    @Test func ownersComeOutInDeadlineOrderAfterMovesAndClears() {
        let start = ContinuousClock.now
        var heap = DeadlineHeap()
        let owners = (0..<200).map(Owner.init)
        // Deadlines in a scrambled order: owner n at (n * 37) % 200 ms.
        for owner in owners { heap.set(owner, at: start + .milliseconds((owner.name * 37) % 200)) }
        #expect(heap.count == 200 && owners.allSatisfy { $0.deadlineSlot >= 0 })
        // Move every tenth later by 1 s, clear every seventh.
        for owner in owners where owner.name % 10 == 0 { heap.set(owner, at: start + .seconds(1) + .milliseconds(owner.name)) }
        for owner in owners where owner.name % 7 == 0 { heap.clear(owner) }
        #expect(owners.filter { $0.name % 7 == 0 }.allSatisfy { $0.deadlineSlot == -1 && heap.deadline(of: $0) == nil })
        heap.set(owners[3], at: start - .seconds(1))  // moved earlier: first out
        var expected: [Int: ContinuousClock.Instant] = [:]
        for owner in owners where owner.name % 7 != 0 {
            expected[owner.name] = owner.name == 3 ? start - .seconds(1)
                : owner.name % 10 == 0 ? start + .seconds(1) + .milliseconds(owner.name)
                : start + .milliseconds((owner.name * 37) % 200)
            #expect(heap.deadline(of: owner) == expected[owner.name], "each slot points at its own entry")
        }
        var out: [ContinuousClock.Instant] = []
        var first: Int?
        while let owner = heap.popDue(now: start + .seconds(10)) {
            let name = (owner as! Owner).name
            first = first ?? name
            #expect(owner.deadlineSlot == -1)
            out.append(expected[name]!)
        }
        #expect(first == 3)
        #expect(out.count == expected.count && out == out.sorted(), "earliest first")
        #expect(heap.count == 0 && heap.nextDeadline == nil)
    }

    /// On a running loop, a deadline calls its owner on the loop thread; a cleared one never does.
    @Test func aLoopCallsItsOwnersAtTheirDeadlines() async throws {
        final class Recorder: LoopDeadlineOwner, @unchecked Sendable {
            var deadlineSlot = -1
            let reached: @Sendable () -> Void
            init(_ reached: @escaping @Sendable () -> Void) { self.reached = reached }
            func deadlineReached(now: ContinuousClock.Instant) { reached() }
        }
        let loop = try EventLoop.start(name: "deadline-test")
        defer { loop.stop() }
        let (events, input) = AsyncStream<String>.makeStream()
        let kept = Recorder { input.yield("kept") }, cleared = Recorder { input.yield("cleared") }
        loop.execute {
            loop.setDeadline(cleared, at: .now + .milliseconds(20))
            loop.setDeadline(kept, at: .now + .milliseconds(40))
            loop.clearDeadline(cleared)
            loop.execute { _ = loop.schedule(after: .milliseconds(100)) { input.finish() } }
        }
        var seen: [String] = []
        for await event in events { seen.append(event) }
        #expect(seen == ["kept"])
    }

    @Test func onlyDueOwnersComeOut() {
        let start = ContinuousClock.now
        var heap = DeadlineHeap()
        let early = Owner(1), late = Owner(2)
        heap.set(late, at: start + .seconds(5))
        heap.set(early, at: start + .seconds(1))
        #expect(heap.nextDeadline == start + .seconds(1))
        #expect(heap.popDue(now: start) == nil)
        #expect(heap.popDue(now: start + .seconds(2)) === early)
        #expect(heap.popDue(now: start + .seconds(2)) == nil)
        #expect(heap.deadline(of: late) == start + .seconds(5) && late.deadlineSlot == 0)
    }
}
