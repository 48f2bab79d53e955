@testable import Relay
import Testing

/// The push queue shared by accounts (docs/security.md, "One account never degrades
/// another": one account cannot delay another's pushes),
/// driven as a state machine: jobs in, starts and refusals out.
@Suite struct FairPushQueueTests {
    typealias Queue = FairPushQueue<String, String>

    static func started(_ actions: [Queue.Action]) -> [String] {
        actions.compactMap { if case .start(let job) = $0 { job } else { nil } }
    }

    static func refused(_ actions: [Queue.Action]) -> [String] {
        actions.compactMap { if case .refuse(let job) = $0 { job } else { nil } }
    }

    /// A flooding account's backlog never stands in front of a quiet account's push: the
    /// next free slot goes to the quiet one.
    @Test func aQuietAccountsPushTakesTheNextFreeSlot() {
        var queue = Queue(maximumInFlight: 2, maximumInFlightPerAccount: 2, maximumQueuedPerAccount: 100)
        var started: [String] = []
        for n in 0..<50 { started += Self.started(queue.submit("flood-\(n)", account: "flood")) }
        #expect(started == ["flood-0", "flood-1"])
        #expect(Self.started(queue.submit("quiet-0", account: "quiet")).isEmpty)
        #expect(Self.started(queue.finished(account: "flood")) == ["quiet-0"])
        #expect(Self.started(queue.finished(account: "flood")) == ["flood-2"])
        #expect(queue.counts.inFlight == 2 && queue.counts.waiting == 47)
    }

    /// Free slots go to accounts in turn, one job each.
    @Test func slotsGoRoundRobin() {
        var queue = Queue(maximumInFlight: 1, maximumInFlightPerAccount: 1, maximumQueuedPerAccount: 10)
        #expect(Self.started(queue.submit("a0", account: "a")) == ["a0"])
        for job in ["a1", "a2"] { _ = queue.submit(job, account: "a") }
        for job in ["b0", "b1"] { _ = queue.submit(job, account: "b") }
        _ = queue.submit("c0", account: "c")
        var order: [String] = []
        for account in ["a", "a", "b", "c", "a", "b"] { order += Self.started(queue.finished(account: account)) }
        #expect(order == ["a1", "b0", "c0", "a2", "b1"])
    }

    /// No account holds more than its share of the slots, even when nobody else waits.
    @Test func anAccountHoldsAtMostItsShareOfSlots() {
        var queue = Queue(maximumInFlight: 10, maximumInFlightPerAccount: 3, maximumQueuedPerAccount: 10)
        var started: [String] = []
        for n in 0..<5 { started += Self.started(queue.submit("a\(n)", account: "a")) }
        #expect(started == ["a0", "a1", "a2"])
        #expect(Self.started(queue.submit("b0", account: "b")) == ["b0"])
        #expect(Self.started(queue.finished(account: "a")) == ["a3"])
    }

    /// A full queue refuses only its own account's new jobs.
    @Test func aFullQueueRefusesOnlyItsAccount() {
        var queue = Queue(maximumInFlight: 1, maximumInFlightPerAccount: 1, maximumQueuedPerAccount: 2)
        _ = queue.submit("a0", account: "a")
        _ = queue.submit("a1", account: "a")
        _ = queue.submit("a2", account: "a")
        #expect(Self.refused(queue.submit("a3", account: "a")) == ["a3"])
        #expect(Self.refused(queue.submit("b0", account: "b")).isEmpty)
        #expect(queue.counts.waiting == 3)
    }
}
