import Foundation
@testable import RelayCore
import Testing

/// The instance state's I/O-free parts, driven without sockets or a database: the socket
/// table, the ping ledger, the pings kept during hellos, and the call batcher.
@Suite struct InstanceStatePartsTests {
    /// A socket handle without a socket (the instance state's tests use the same).
    typealias Handle = InstanceStateTests.Phone

    static func ping(_ id: UUID = UUID(), expiresIn seconds: Double = 60, key: [UInt8]? = nil) -> LocateMessage {
        LocateMessage(id: id, clientID: "c", expiresMs: Int64((Date().timeIntervalSince1970 + seconds) * 1000), requester: nil,
                      replyKey: key)
    }

    /// One phone per user is held inline; a second socket of a user makes a set, which
    /// shrinks back; only registered sockets are indexed; forgetting the last socket empties
    /// the index.
    @Test func theSocketTableIndexesRegisteredSocketsByUser() {
        var table = SocketTable()
        let user = UUID(), phone = UUID(), tablet = UUID(), first = UUID(), second = UUID(), third = UUID()
        table[first] = .registered(.init(handle: Handle(user: user), device: phone, platform: .ios, name: "Ada's iPhone"))
        guard case .one(first)? = table.connections(ofUser: user) else { Issue.record("one inline"); return }
        table[second] = .registered(.init(handle: Handle(user: user), device: tablet, platform: .init("android"), name: "Tab"))
        let waiting = Handle(user: user)
        table[third] = .registering(.init(handle: waiting, device: phone, name: "New", platform: .init("nokia"),
                                          appVersion: "1"), queued: [])
        #expect(Set(table.connections(ofUser: user) ?? .many([])) == [first, second], "a registering socket is not indexed")
        #expect(table.registeredCount == 2 && table.count == 3)
        table[third] = .registered(.init(handle: waiting, device: phone, platform: .init("nokia"), name: "New"))
        #expect(Set(table.connections(ofUser: user) ?? .many([])) == [first, second, third])
        #expect(table.record(third)?.platform == .web && table.record(second)?.platform.text == "android")
        #expect(table.record(first)?.name == "Ada's iPhone")
        table[first] = nil
        #expect(Set(table.connections(ofUser: user) ?? .many([])) == [second, third])
        table[first] = nil
        #expect(table.registeredCount == 2, "a socket is forgotten once")
        table[second] = nil
        guard case .one(third)? = table.connections(ofUser: user) else { Issue.record("back inline"); return }
        table[third] = nil
        #expect(table.count == 0 && table.registeredCount == 0 && table.connections(ofUser: user) == nil)
    }

    /// A socket gets each ping once; the first socket of a request asks for a delivered
    /// mark; the answering socket gets no cancel and its reply key back; an ended request
    /// is forgotten; expired pings go.
    @Test func theLedgerSendsEachPingOnceAndCancelsTheOthers() {
        var ledger = PingLedger()
        let key: [UInt8] = Array(repeating: 9, count: 32)
        let ping = Self.ping(key: key), a = UUID(), b = UUID(), stranger = UUID()
        #expect(ledger.send(ping, to: a) == (true, true))
        #expect(ledger.send(ping, to: a) == (false, false))
        #expect(ledger.send(ping, to: b) == (true, false))
        #expect(ledger.answered(ping.id, by: stranger) == nil, "a socket that never got the ping gets no key")
        #expect(ledger.answered(ping.id, by: a) == key)
        #expect(ledger.end(ping.id) == [b])
        #expect(ledger.end(ping.id).isEmpty && !ledger.contains(ping.id))
        _ = ledger.send(Self.ping(expiresIn: -1), to: a)
        _ = ledger.send(Self.ping(expiresIn: 60), to: a)
        ledger.forgetExpired(now: Date())
        #expect(ledger.count == 1)
    }

    /// Pings that arrive while a user's hello is in the database are kept for it, up to
    /// `maximumPings`, for every hello of theirs in flight; nobody else's are kept.
    @Test func pingsKeptDuringAHelloAreBounded() {
        var inFlight = HellosInFlight()
        let user = UUID(), other = UUID()
        inFlight.begin(user)
        inFlight.begin(user)
        for index in 0..<(HellosInFlight.maximumPings + 10) {
            inFlight.keep(LocateMessage(id: UUID(), clientID: "c\(index)", expiresMs: 1, requester: nil), for: user)
        }
        inFlight.keep(Self.ping(), for: other)
        let first = inFlight.end(user)
        #expect(first.count == HellosInFlight.maximumPings && first.first?.clientID == "c0")
        #expect(inFlight.contains(user), "the second hello still waits")
        #expect(inFlight.end(user).count == HellosInFlight.maximumPings)
        #expect(!inFlight.contains(user) && inFlight.end(other).isEmpty)
    }

    /// The first item arms the window; items inside it wait; the window's end sends them
    /// together; a full batch goes at once; at most `maximumInFlight` calls run, and what
    /// waits for a slot goes when one is free.
    @Test func theBatcherCollectsAWindowAndBoundsCallsInFlight() {
        var batcher = CallBatcher<Int>(window: .milliseconds(5), maximumBatch: 3, maximumInFlight: 1)
        guard case .armTimer(.milliseconds(5)) = batcher.add(1).first else { Issue.record("window armed"); return }
        #expect(batcher.add(2).isEmpty)
        guard case .send([1, 2]) = batcher.windowEnded().first else { Issue.record("window sent"); return }
        // One call in flight: a full batch waits for it, and goes when it returns.
        _ = batcher.add(3)
        _ = batcher.add(4)
        #expect(batcher.add(5).isEmpty, "the slot is taken")
        #expect(batcher.add(6).isEmpty)
        guard case .send([3, 4, 5])? = batcher.sent().first else { Issue.record("sent after the slot freed"); return }
        #expect(batcher.waiting == [6])
        #expect(batcher.windowEnded().isEmpty, "the window ends while the slot is taken")
        guard case .send([6])? = batcher.sent().first else { Issue.record("the rest when the slot frees"); return }
        #expect(batcher.sent().isEmpty && batcher.waiting.isEmpty)
    }

    /// With a window of zero the first item goes at once; what arrives while its call runs
    /// goes together when it returns.
    @Test func aZeroWindowSendsAtOnceAndBatchesWhileBusy() {
        var batcher = CallBatcher<Int>(window: .zero, maximumBatch: 100, maximumInFlight: 1)
        guard case .send([1])? = batcher.add(1).first else { Issue.record("sent at once"); return }
        #expect(batcher.add(2).isEmpty && batcher.add(3).isEmpty)
        guard case .send([2, 3])? = batcher.sent().first else { Issue.record("the rest together"); return }
        #expect(batcher.sent().isEmpty && batcher.waiting.isEmpty)
    }

    /// A call its owner makes by itself (`CallCoalescer`'s lone call, in the caller's task)
    /// takes a slot only when one is free and nothing waits: it never overtakes waiting
    /// items, and its end lets them go as a batch.
    @Test func aSlotTakenForALoneCallKeepsTheOrder() {
        var batcher = CallBatcher<Int>(window: .zero, maximumBatch: 8, maximumInFlight: 2)
        let first = batcher.takeSlotIfFree(), second = batcher.takeSlotIfFree(), third = batcher.takeSlotIfFree()
        #expect(first && second && !third, "two slots, then none")
        let one = batcher.add(1), two = batcher.add(2)
        #expect(one.isEmpty && two.isEmpty)
        guard case .send([1, 2])? = batcher.sent().first else { Issue.record("the waiting go when a slot frees"); return }
        let afterBatch = batcher.takeSlotIfFree()
        #expect(!afterBatch, "no slot: the batch took the one that freed")
        let idle = batcher.sent()
        #expect(idle.isEmpty)
        let three = batcher.add(3)
        #expect(three.count == 1, "a free slot and nothing waiting: at once")
        let full = batcher.takeSlotIfFree()
        #expect(!full)
    }

    /// The waiting buffer a surge grew is given back once it drains; a small one is kept,
    /// so that a steady trickle of calls does not make it again for each one.
    @Test func aDrainedBufferIsGivenBackOnlyAfterASurge() {
        var batcher = CallBatcher<Int>(window: .zero, maximumBatch: 1_000, maximumInFlight: 1)
        _ = batcher.add(0)
        for item in 1...3 { _ = batcher.add(item) }
        _ = batcher.sent()
        #expect(batcher.waiting.isEmpty && batcher.waiting.capacity > 0, "three waited: their buffer is kept")
        for item in 4...1_000 { _ = batcher.add(item) }
        _ = batcher.sent()
        #expect(batcher.waiting.isEmpty && batcher.waiting.capacity == 0, "a surge's buffer is given back")
    }

    /// A storm of 10,000 items costs 10,000 / maximumBatch calls, never more.
    @Test func aStormCostsBatchesNotItems() {
        var batcher = CallBatcher<Int>(window: .milliseconds(5), maximumBatch: 250, maximumInFlight: 2)
        var calls = 0, sentItems = 0
        func apply(_ actions: [CallBatcher<Int>.Action]) {
            for case .send(let batch) in actions {
                calls += 1
                sentItems += batch.count
            }
        }
        for item in 0..<10_000 {
            apply(batcher.add(item))
            if batcher.inFlight == 2 { apply(batcher.sent()) }
        }
        apply(batcher.windowEnded())
        while batcher.inFlight > 0 { apply(batcher.sent()) }
        #expect(sentItems == 10_000 && calls == 40)
    }
}
