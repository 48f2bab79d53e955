import Foundation
import Synchronization

/// The sealed fixes this instance settled in the last few minutes, so that a waiter that
/// missed the `whereabot_answer` notification (its LISTEN was down) can get it again
/// through `relay.replay_answer`. Holds only ciphertext for the waiter's key; bounded in
/// count and age. Remembering is on every located answer's path, so it costs O(1) amortized:
/// answers expire in the order they were stored, and only expired ones are dropped.
final class SealedAnswerMemory: Sendable {
    /// How long a sealed answer is kept (longer than any request may wait).
    static let defaultLifetime: Duration = .seconds(300)
    /// At most this many answers are kept; the oldest go first.
    static let defaultCapacity = 10_000

    private struct Entry {
        let sealed: String
        let storedAt: ContinuousClock.Instant
    }

    private struct Store {
        var byID: [UUID: Entry] = [:]
        var order: [UUID] = []  // ids by storing time; `head` is the oldest still held
        var head = 0
    }

    private let store = Mutex(Store())
    private let replays = Atomic<Int>(0)
    private let lifetime: Duration
    private let capacity: Int
    /// Where an answer's age is read (the instance's clock).
    private let clock: RelayClock

    init(lifetime: Duration = SealedAnswerMemory.defaultLifetime, capacity: Int = SealedAnswerMemory.defaultCapacity,
         clock: RelayClock = .system) {
        self.lifetime = lifetime
        self.capacity = capacity
        self.clock = clock
    }

    /// Remembers the sealed answer of request `id`.
    func remember(_ sealed: String, for id: UUID) {
        let now = clock.instant
        store.withLock { store in
            while store.head < store.order.count {
                let oldest = store.order[store.head]
                guard store.byID.count >= capacity || store.byID[oldest].map({ now - $0.storedAt > lifetime }) ?? true else { break }
                store.byID[oldest] = nil
                store.head += 1
            }
            if store.head > store.order.count / 2 {  // compact now and then, not on every call
                store.order.removeFirst(store.head)
                store.head = 0
            }
            store.byID[id] = Entry(sealed: sealed, storedAt: now)
            store.order.append(id)
        }
    }

    /// Answers held now.
    var count: Int { store.withLock { $0.byID.count } }

    /// Answers sent again so far (for /metrics).
    var replayed: Int { replays.load(ordering: .relaxed) }

    /// One answer was sent again.
    func countReplay() { replays.add(1, ordering: .relaxed) }

    /// The sealed answer of request `id`, if this instance settled it recently.
    func sealed(for id: UUID) -> String? {
        let now = clock.instant
        return store.withLock { store in
            store.byID[id].flatMap { now - $0.storedAt <= lifetime ? $0.sealed : nil }
        }
    }
}
