/// Something with one deadline on an event loop — a connection: the loop keeps it in an
/// intrusive heap, so a deadline costs no timer object, no closure and no allocation, and
/// moving it costs O(log n).
public protocol LoopDeadlineOwner: AnyObject {
    /// Where the loop keeps the owner in its heap; -1 when it has no deadline. Set by the
    /// loop only (start it at -1).
    var deadlineSlot: Int { get set }
    /// The deadline passed (loop thread); it is cleared before this is called.
    func deadlineReached(now: ContinuousClock.Instant)
}

/// The owners with a deadline, earliest first: a binary heap whose entries know their own
/// index (each owner's `deadlineSlot`), so an owner's deadline moves or goes in place. The
/// heap holds its owners strongly while they have a deadline (loop thread only).
struct DeadlineHeap {
    private struct Entry {
        var deadline: ContinuousClock.Instant
        let owner: any LoopDeadlineOwner
    }

    private var entries: [Entry] = []

    /// Owners with a deadline.
    var count: Int { entries.count }

    /// The earliest deadline.
    var nextDeadline: ContinuousClock.Instant? { entries.first?.deadline }

    /// `owner`'s deadline, if it has one.
    func deadline(of owner: any LoopDeadlineOwner) -> ContinuousClock.Instant? {
        owner.deadlineSlot >= 0 ? entries[owner.deadlineSlot].deadline : nil
    }

    /// Sets (or moves) `owner`'s deadline.
    mutating func set(_ owner: any LoopDeadlineOwner, at deadline: ContinuousClock.Instant) {
        let slot = owner.deadlineSlot
        guard slot >= 0 else {
            entries.append(Entry(deadline: deadline, owner: owner))
            owner.deadlineSlot = entries.count - 1
            siftUp(entries.count - 1)
            return
        }
        let earlier = deadline < entries[slot].deadline
        entries[slot].deadline = deadline
        if earlier { siftUp(slot) } else { siftDown(slot) }
    }

    /// Removes `owner`'s deadline, if it has one.
    mutating func clear(_ owner: any LoopDeadlineOwner) {
        let slot = owner.deadlineSlot
        guard slot >= 0 else { return }
        owner.deadlineSlot = -1
        let last = entries.count - 1
        if slot != last {
            entries.swapAt(slot, last)
            entries[slot].owner.deadlineSlot = slot
        }
        entries.removeLast()
        if entries.isEmpty, entries.capacity > 256 { entries = [] }  // a surge's buffer is given back, a small one kept
        guard slot < entries.count else { return }
        siftDown(slot)
        siftUp(slot)
    }

    /// The earliest owner whose deadline is at or before `now`, removed; nil when none is due.
    mutating func popDue(now: ContinuousClock.Instant) -> (any LoopDeadlineOwner)? {
        guard let first = entries.first, first.deadline <= now else { return nil }
        clear(first.owner)
        return first.owner
    }

    private mutating func swap(_ a: Int, _ b: Int) {
        entries.swapAt(a, b)
        entries[a].owner.deadlineSlot = a
        entries[b].owner.deadlineSlot = b
    }

    private mutating func siftUp(_ index: Int) {
        HeapOrder.siftUp(index, less: { entries[$0].deadline < entries[$1].deadline }, swap: { swap($0, $1) })
    }

    private mutating func siftDown(_ index: Int) {
        HeapOrder.siftDown(index, count: entries.count, less: { entries[$0].deadline < entries[$1].deadline },
                           swap: { swap($0, $1) })
    }
}
