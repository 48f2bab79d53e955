import CSystem
import Synchronization

/// What the allocator holds for the process, and giving back what it keeps free.
///
/// A burst of sockets (a restart's reconnect storm, thousands of hellos) leaves glibc's
/// allocator holding the memory the burst's buffers and parses used: free to it, yet
/// resident, so an idle instance's RSS stayed ~40 % above its live heap (issue 43). Each
/// maintenance beat looks (`mallinfo2`, a walk of the allocator's bins) and, when more than
/// `threshold` bytes came free since the last trim, trims (`malloc_trim(0)`, a few
/// milliseconds on the maintenance task, never on the event loop). Pages given back in the middle of the heap still count as free to
/// the allocator, so the mark is what was free after the last trim, not zero.
final class HeapTrimmer: Sendable {
    /// Free bytes the allocator may keep before a beat trims.
    static let threshold = 4 << 20

    private let trimsMade = Atomic<Int>(0)
    /// Free bytes after the last trim (or the least seen since): what a trim cannot give again.
    private let mark = Mutex(0)

    /// A trimmer that has not trimmed yet.
    init() {}

    /// Looks, and trims if enough came free. Returns whether it trimmed.
    @discardableResult
    func trimIfWorthIt() -> Bool {
        let free = look().free
        let since = mark.withLock { mark in
            mark = min(mark, free)
            return free - mark
        }
        guard since > Self.threshold else { return false }
        _ = wb_heap_trim()
        let after = look().free
        mark.withLock { $0 = after }
        trimsMade.add(1, ordering: .relaxed)
        return true
    }

    /// The bytes in use and the bytes the allocator keeps free, now.
    func look() -> (inUse: Int, free: Int) {
        (Int(wb_heap_in_use()), Int(wb_heap_free()))
    }

    /// Trims so far.
    var trims: Int { trimsMade.load(ordering: .relaxed) }
}
