import Synchronization

/// A one-shot timer of an `EventLoop`; `cancel()` from any thread stops it from firing.
public final class LoopTimer: Sendable {
    private let state = Atomic<Bool>(false)

    init() {}

    /// Stops the timer if it has not fired yet (it is dropped from the loop lazily).
    public func cancel() { state.store(true, ordering: .relaxed) }

    /// Whether `cancel()` was called.
    public var isCancelled: Bool { state.load(ordering: .relaxed) }
}

/// The timers of a loop, earliest first (a binary heap; loop thread only). Cancelled
/// entries are skipped when they come up, and swept out whenever they make up more than
/// half of a heap of more than 64, so the heap stays bounded by the live timers.
struct TimerHeap {
    struct Entry {
        let deadline: ContinuousClock.Instant
        let timer: LoopTimer
        let job: @Sendable () -> Void
    }

    private var entries: [Entry] = []
    private var insertsSinceSweep = 0

    var count: Int { entries.count }

    /// When the earliest live timer is due.
    var nextDeadline: ContinuousClock.Instant? {
        mutating get {
            dropCancelledTop()
            return entries.first?.deadline
        }
    }

    mutating func insert(_ entry: Entry) {
        entries.append(entry)
        siftUp(entries.count - 1)
        insertsSinceSweep += 1
        if entries.count > 64, insertsSinceSweep >= entries.count / 2 { sweep() }
    }

    /// The job of the earliest live timer due at `now`, removed; nil when none is due.
    mutating func popDue(now: ContinuousClock.Instant) -> (@Sendable () -> Void)? {
        dropCancelledTop()
        guard let first = entries.first, first.deadline <= now else { return nil }
        removeTop()
        return first.job
    }

    private mutating func dropCancelledTop() {
        while let first = entries.first, first.timer.isCancelled { removeTop() }
    }

    /// Rebuilds the heap without cancelled timers.
    private mutating func sweep() {
        insertsSinceSweep = 0
        let live = entries.filter { !$0.timer.isCancelled }
        guard live.count < entries.count else { return }
        entries = live
        for index in stride(from: entries.count / 2 - 1, through: 0, by: -1) { siftDown(index) }
    }

    private mutating func removeTop() {
        let last = entries.removeLast()
        guard !entries.isEmpty else { return }
        entries[0] = last
        siftDown(0)
    }

    private mutating func siftUp(_ index: Int) {
        HeapOrder.siftUp(index, less: { entries[$0].deadline < entries[$1].deadline }, swap: { entries.swapAt($0, $1) })
    }

    private mutating func siftDown(_ index: Int) {
        HeapOrder.siftDown(index, count: entries.count, less: { entries[$0].deadline < entries[$1].deadline },
                           swap: { entries.swapAt($0, $1) })
    }
}

extension Duration {
    /// Whole milliseconds, rounded up (a timer never fires early).
    var roundedUpMilliseconds: Int64 {
        let (seconds, attoseconds) = components
        return seconds * 1000 + (attoseconds + 999_999_999_999_999) / 1_000_000_000_000_000
    }
}
