import Foundation
import Synchronization

/// The sealed fixes this instance settled in the last few minutes, so that a waiter that
/// missed the `whereabot_answer` notification (its LISTEN was down) can get it again
/// through `relay.replay_answer`. Holds only ciphertext for the waiter's key; bounded in
/// count and age.
final class SealedAnswerMemory: Sendable {
    /// How long a sealed answer is kept (longer than any request may wait).
    static let defaultLifetime: Duration = .seconds(300)
    /// At most this many answers are kept; the oldest go first.
    static let defaultCapacity = 10_000

    private struct Entry {
        let id: UUID
        let sealed: String
        let storedAt: ContinuousClock.Instant
    }

    private let entries = Mutex<[Entry]>([])
    private let replays = Atomic<Int>(0)
    private let lifetime: Duration
    private let capacity: Int

    init(lifetime: Duration = SealedAnswerMemory.defaultLifetime, capacity: Int = SealedAnswerMemory.defaultCapacity) {
        self.lifetime = lifetime
        self.capacity = capacity
    }

    /// Remembers the sealed answer of request `id`.
    func remember(_ sealed: String, for id: UUID) {
        let now = ContinuousClock.now
        entries.withLock { entries in
            entries.removeAll { now - $0.storedAt > lifetime }
            if entries.count >= capacity { entries.removeFirst(entries.count - capacity + 1) }
            entries.append(Entry(id: id, sealed: sealed, storedAt: now))
        }
    }

    /// Answers sent again so far (for /metrics).
    var replayed: Int { replays.load(ordering: .relaxed) }

    /// One answer was sent again.
    func countReplay() { replays.add(1, ordering: .relaxed) }

    /// The sealed answer of request `id`, if this instance settled it recently.
    func sealed(for id: UUID) -> String? {
        let now = ContinuousClock.now
        return entries.withLock { entries in
            entries.last { $0.id == id && now - $0.storedAt <= lifetime }?.sealed
        }
    }
}
