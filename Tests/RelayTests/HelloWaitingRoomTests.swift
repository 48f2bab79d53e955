import Foundation
@testable import Relay
import Synchronization
import Testing

/// Sockets before their hello: bounded per account and relay-wide, never per address, and
/// queued in order past the relay-wide bound rather than refused.
@Suite struct HelloWaitingRoomTests {
    /// Thousands of customers behind one address (a NAT, a balancer without PROXY) all get
    /// places; an account past its own bound is refused, and only it.
    @Test func oneAddressIsNotALimit() async {
        let room = HelloWaitingRoom()
        var tickets: [HelloWaitingRoom.Ticket] = []
        for _ in 0..<1_000 {
            guard let ticket = await room.admit(account: UUID(), address: "203.0.113.1") else { break }
            tickets.append(ticket)
        }
        #expect(tickets.count == 1_000)
        let busy = UUID()
        for _ in 0..<HelloWaitingRoom.maximumPerAccount { tickets.append(await room.admit(account: busy, address: "203.0.113.1")!) }
        #expect(await room.admit(account: busy, address: "198.51.100.1") == nil, "the account's bound, from any address")
        #expect(await room.admit(account: UUID(), address: "203.0.113.1") != nil)
        #expect(room.count == 1_000 + HelloWaitingRoom.maximumPerAccount)
        tickets.removeAll()
        #expect(room.count == 0)
    }

    /// Past the relay-wide bound sockets wait in arrival order and get places as earlier
    /// ones say hello; past the queue's bound they are refused.
    @Test func theQueueKeepsItsOrder() async throws {
        let room = HelloWaitingRoom(maximumWaiting: 2, maximumQueued: 3)
        var held = [await room.admit(account: UUID(), address: "a")!, await room.admit(account: UUID(), address: "a")!]
        let arrivals = Arrivals()
        var waiters: [Task<Void, Never>] = []
        for index in 0..<3 {
            waiters.append(Task { arrivals.add(index, await room.admit(account: UUID(), address: "a")) })
            while room.queuedCount < index + 1 { await Task.yield() }
        }
        #expect(await room.admit(account: UUID(), address: "a") == nil, "the queue is full")
        held.removeFirst()  // a socket said hello: the first in line gets its place
        await waiters[0].value
        #expect(arrivals.order == [0])
        held.removeAll()
        arrivals.release(0)  // two more places: the next two in line, in order
        await waiters[1].value
        await waiters[2].value
        #expect(arrivals.order == [0, 1, 2] && arrivals.admitted == 2)
        #expect(room.count == 2 && room.queuedCount == 0)
    }

    /// A queued caller whose client hung up (its task cancelled) leaves the line and its
    /// account's count; the next in line is unaffected.
    @Test func aCancelledCallerLeavesTheQueue() async {
        let room = HelloWaitingRoom(maximumWaiting: 1, maximumQueued: 10)
        var held: HelloWaitingRoom.Ticket? = await room.admit(account: UUID(), address: "a")
        let account = UUID()
        let gone = Task { await room.admit(account: account, address: "a") != nil }
        while room.queuedCount < 1 { await Task.yield() }
        let arrivals = Arrivals()
        let next = Task { arrivals.add(0, await room.admit(account: UUID(), address: "a")) }
        while room.queuedCount < 2 { await Task.yield() }
        #expect(room.count(of: account) == 1)
        gone.cancel()
        #expect(await gone.value == false)
        #expect(room.queuedCount == 1 && room.count(of: account) == 0)
        held = nil
        await next.value
        #expect(arrivals.admitted == 1 && room.queuedCount == 0)
        _ = held
    }
}

/// The order queued callers got their places in, holding their tickets until released.
final class Arrivals: Sendable {
    private let state = Mutex<(order: [Int], tickets: [Int: HelloWaitingRoom.Ticket])>(([], [:]))
    func add(_ index: Int, _ ticket: HelloWaitingRoom.Ticket?) {
        state.withLock {
            $0.order.append(index)
            $0.tickets[index] = ticket
        }
    }
    func release(_ index: Int) { _ = state.withLock { $0.tickets.removeValue(forKey: index) } }
    var order: [Int] { state.withLock { $0.order } }
    var admitted: Int { state.withLock { $0.tickets.count } }
}
