import Foundation
import Synchronization

/// Sockets whose credential verified and that have not said hello yet (docs/security.md). Each costs
/// a place for up to `InstanceDriver.helloTimeout` and its hello's share of a database call, so
/// they are bounded — per account (`maximumPerAccount`: one account cannot hold the room)
/// and relay-wide (`maximumWaiting`) — but never per client address: behind a balancer
/// without the PROXY protocol or a carrier NAT, thousands of customers share one address.
/// (Strangers are limited per address before they get here: a credential that fails costs
/// its address budget, `TokenBuckets`.)
///
/// Past the relay-wide bound a socket is not refused: it queues, first come first served,
/// for the next place (a reconnect storm drains in order, in hello batches, instead of
/// retrying on a timer). Only past `maximumQueued`, or past its account's bound, is it
/// refused (429 with `retryAfterSeconds`). A queued caller that goes away (its client hung
/// up, cancelling its task) leaves the queue.
final class HelloWaitingRoom: Sendable {
    /// Sockets of one account waiting for their hello (or queued for a place) at once.
    static let maximumPerAccount = 5
    /// Sockets waiting for their hello relay-wide: eight of the driver's hello batches
    /// (`InstanceDriver.helloBatch`), a few database calls ahead of what the driver is sending.
    static let maximumWaiting = InstanceDriver.helloBatch * 8
    /// Sockets queued for a place: a storm of 20,000 phones on one instance queues whole.
    static let maximumQueued = 20_000
    /// What a refused socket is told to wait: about what the account's or the room's
    /// waiting sockets need to say hello or time out.
    static let retryAfterSeconds = 5

    private struct Queued {
        let id: UInt64
        let account: UUID
        let address: String
        let continuation: CheckedContinuation<Ticket?, Never>
    }

    private struct State {
        var waiting = 0
        /// Waiting and queued sockets per account.
        var accounts: [UUID: Int] = [:]
        var queue: [Queued] = []
        /// The first entry of `queue` still in line (entries before it were admitted).
        var head = 0
        var nextID: UInt64 = 0
        /// Callers cancelled before they were queued.
        var cancelledEarly: Set<UInt64> = []
        var queuedCount: Int { queue.count - head }
    }

    private let state = Mutex(State())
    private let maximumWaiting: Int
    private let maximumQueued: Int

    /// Creates a room with its bounds (tests make them small).
    init(maximumWaiting: Int = HelloWaitingRoom.maximumWaiting, maximumQueued: Int = HelloWaitingRoom.maximumQueued) {
        self.maximumWaiting = maximumWaiting
        self.maximumQueued = maximumQueued
    }

    /// A place for a socket of `account` (from `address`, which the ticket remembers): at
    /// once while the room has one, else after the sockets queued before it; nil when the
    /// account already has `maximumPerAccount` sockets here, or the queue is full.
    func admit(account: UUID, address: String) async -> Ticket? {
        enum Decision {
            case admitted
            case refused
            case queue(UInt64)
        }
        let decision = state.withLock { state -> Decision in
            guard state.accounts[account, default: 0] < Self.maximumPerAccount else { return .refused }
            if state.waiting < maximumWaiting, state.queuedCount == 0 {
                state.waiting += 1
                state.accounts[account, default: 0] += 1
                return .admitted
            }
            guard state.queuedCount < maximumQueued else { return .refused }
            state.accounts[account, default: 0] += 1
            state.nextID += 1
            return .queue(state.nextID)
        }
        switch decision {
        case .admitted: return Ticket(room: self, account: account, address: address)
        case .refused: return nil
        case .queue(let id): return await queue(id: id, account: account, address: address)
        }
    }

    private func queue(id: UInt64, account: UUID, address: String) async -> Ticket? {
        await withTaskCancellationHandler {
            await withCheckedContinuation { continuation in
                let queued = state.withLock { state -> Bool in
                    if state.cancelledEarly.remove(id) != nil {
                        Self.forget(account, in: &state)
                        return false
                    }
                    state.queue.append(Queued(id: id, account: account, address: address, continuation: continuation))
                    return true
                }
                if !queued { continuation.resume(returning: nil) }
                admitQueued()  // places may have freed meanwhile
            }
        } onCancel: {
            let removed = state.withLock { state -> Queued? in
                guard let index = state.queue[state.head...].firstIndex(where: { $0.id == id }) else {
                    state.cancelledEarly.insert(id)
                    return nil
                }
                let entry = state.queue.remove(at: index)
                Self.forget(entry.account, in: &state)
                return entry
            }
            removed?.continuation.resume(returning: nil)
        }
    }

    /// Sockets waiting for their hello now.
    var count: Int { state.withLock { $0.waiting } }

    /// Sockets of `account` waiting or queued now.
    func count(of account: UUID) -> Int { state.withLock { $0.accounts[account, default: 0] } }

    /// Sockets queued for a place now.
    var queuedCount: Int { state.withLock { $0.queuedCount } }

    private func leave(account: UUID) {
        state.withLock { state in
            state.waiting -= 1
            Self.forget(account, in: &state)
        }
        admitQueued()
    }

    /// Gives free places to the queue's head, in order (tickets are made and handed out
    /// outside the lock: a ticket freed inside it would take the lock again).
    private func admitQueued() {
        while true {
            let next = state.withLock { state -> Queued? in
                guard state.waiting < maximumWaiting, state.head < state.queue.count else { return nil }
                let entry = state.queue[state.head]
                state.head += 1
                state.waiting += 1
                if state.head == state.queue.count || state.head > 1_024 {  // give the admitted entries' memory back
                    state.queue.removeFirst(state.head)
                    state.head = 0
                }
                return entry
            }
            guard let next else { return }
            next.continuation.resume(returning: Ticket(room: self, account: next.account, address: next.address))
        }
    }

    private static func forget(_ account: UUID, in state: inout State) {
        state.accounts[account, default: 1] -= 1
        if state.accounts[account] == 0 { state.accounts[account] = nil }
        if state.accounts.isEmpty, state.queuedCount == 0 {  // a surge's tables are given back
            state.accounts = [:]
            state.queue = []
            state.head = 0
            state.cancelledEarly = []
        }
    }

    /// One socket's place; given back exactly once, when the ticket is freed (after the
    /// hello, at close — or when a socket whose upgrade never happened is dropped).
    final class Ticket: Sendable {
        private let room: HelloWaitingRoom
        private let account: UUID
        /// The client address the socket came from (a socket that closes without a hello
        /// costs its address, as a failed credential does).
        let address: String

        fileprivate init(room: HelloWaitingRoom, account: UUID, address: String) {
            self.room = room
            self.account = account
            self.address = address
        }

        deinit { room.leave(account: account) }
    }
}
