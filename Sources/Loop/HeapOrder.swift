/// The sifts of a binary min-heap over indexes, shared by `TimerHeap` and `DeadlineHeap`:
/// `less(a, b)` compares two entries, and `swap(a, b)` moves them (an intrusive heap also
/// updates its owners' slots there).
enum HeapOrder {
    /// Moves the entry at `index` up while it is earlier than its parent.
    static func siftUp(_ index: Int, less: (Int, Int) -> Bool, swap: (Int, Int) -> Void) {
        var child = index
        while child > 0 {
            let parent = (child - 1) / 2
            guard less(child, parent) else { return }
            swap(child, parent)
            child = parent
        }
    }

    /// Moves the entry at `index` down while a child of it is earlier.
    static func siftDown(_ index: Int, count: Int, less: (Int, Int) -> Bool, swap: (Int, Int) -> Void) {
        var parent = index
        while true {
            let left = 2 * parent + 1, right = left + 1
            var smallest = parent
            if left < count, less(left, smallest) { smallest = left }
            if right < count, less(right, smallest) { smallest = right }
            guard smallest != parent else { return }
            swap(parent, smallest)
            parent = smallest
        }
    }
}
