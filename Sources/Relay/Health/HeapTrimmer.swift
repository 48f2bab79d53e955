import CSystem
import Synchronization

/// What the allocator holds for the process, and giving back what it keeps free.
///
/// A burst of sockets (a restart's reconnect storm, thousands of hellos) leaves glibc's
/// allocator holding the memory the burst's buffers and parses used: free to it, yet
/// resident, so an idle instance's RSS stayed ~40 % above its live heap (measured
/// with 10,000 idle phones: 11.6 MB in use, 6 MB free and resident). `run()` looks every second
/// (`mallinfo2`, a walk of the allocator's bins) and trims (`malloc_trim(0)`, a few
/// milliseconds on the cooperative pool, never on the event loop) once the heap is steady
/// again — what is in use moved less than `slack` since the last look — with more than
/// `threshold` bytes free, unless nothing moved since the last trim, and at most once per
/// `minimumSpacing` (a trim holds the allocator's locks while it walks). "Moved" counts the
/// resident set too: pages given back in the middle of the heap still count as free to the
/// allocator, so a burst that goes on after a trim (allocating and freeing as much again)
/// leaves the allocator's counts where the trim left them while its pages are resident
/// again (one run in four with 10,000 phones kept 3 MB so, until the next burst).
///
/// Looking at the maintenance beat instead (every 5 s) needed two beats to call a heap
/// steady, so a burst's memory stayed resident for 5 to 10 s, and an instance measured a
/// beat after a burst of 8,000 hellos had given nothing back in three runs of four.
final class HeapTrimmer: Sendable {
    /// Free bytes the allocator may keep before a steady look trims.
    static let threshold = 4 << 20
    /// What "moved" means, between two looks or since the last trim.
    static let slack = 1 << 20
    /// How often `run()` looks.
    static let lookInterval = Duration.seconds(1)

    private let minimumSpacing: Duration
    /// Where the spacing between trims is timed (the instance's clock).
    private let clock: RelayClock

    private struct Marks {
        var lastInUse = 0
        var trimmed: (inUse: Int, free: Int, resident: Int)?
        var trimmedAt: ContinuousClock.Instant?
    }

    private let marks = Mutex(Marks())
    private let trimsMade = Atomic<Int>(0)

    /// A trimmer that has not looked yet and trims at most once per `minimumSpacing` of `clock`.
    init(minimumSpacing: Duration = .seconds(5), clock: RelayClock = .system) {
        self.minimumSpacing = minimumSpacing
        self.clock = clock
    }

    /// Looks every `interval`, trimming when it is worth it, until the task is cancelled.
    func run(every interval: Duration = HeapTrimmer.lookInterval) async {
        while (try? await Task.sleep(for: interval)) != nil {
            trimIfWorthIt()
        }
    }

    /// Looks, and trims if the heap is steady with enough free. Returns whether it trimmed.
    @discardableResult
    func trimIfWorthIt() -> Bool {
        let (inUse, free) = look()
        let resident = Self.resident()
        let now = clock.instant, spacing = minimumSpacing
        let trim = marks.withLock { marks -> Bool in
            defer { marks.lastInUse = inUse }
            let steady = abs(inUse - marks.lastInUse) < Self.slack
            let moved = marks.trimmed.map {
                abs(inUse - $0.inUse) >= Self.slack || abs(free - $0.free) >= Self.slack || resident - $0.resident >= Self.slack
            } ?? true
            let spaced = marks.trimmedAt.map { now - $0 >= spacing } ?? true
            return steady && moved && spaced && free > Self.threshold
        }
        guard trim else { return false }
        _ = wb_heap_trim()
        let after = look()
        let residentAfter = Self.resident()
        marks.withLock {
            $0.trimmed = (after.inUse, after.free, residentAfter)
            $0.trimmedAt = now
        }
        trimsMade.add(1, ordering: .relaxed)
        return true
    }

    /// The bytes in use and the bytes the allocator keeps free, now.
    func look() -> (inUse: Int, free: Int) {
        var inUse = 0, free = 0
        wb_heap_stats(&inUse, &free)
        return (inUse, free)
    }

    /// The process's resident set, in bytes (0 where it cannot be read).
    static func resident() -> Int {
        Int(wb_resident_bytes())
    }

    /// Trims so far.
    var trims: Int { trimsMade.load(ordering: .relaxed) }
}
