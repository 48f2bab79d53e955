import CSystem
import Foundation
import Glibc
import Synchronization

/// Something registered with an event loop for one descriptor's readiness.
public protocol EventLoopSource: AnyObject {
    /// The descriptor is ready (epoll bits); called on the loop thread.
    func handle(events: UInt32)
}

/// One epoll thread: it owns every descriptor registered with it and runs jobs submitted
/// from any thread (woken through an eventfd, never by polling), and its timers (a heap:
/// the loop sleeps until the earliest is due; nothing ticks while nothing is due).
///
/// EventLoop is shared: HTTPServer's sockets and PGBus's database connections can live on
/// one loop, so that a request, its queries and its response stay on one thread, while
/// neither module knows of the other. Everything registered is touched only on the loop
/// thread; other threads reach it through `execute(_:)`. Tasks may prefer the loop as their
/// executor (`Task(executorPreference:)`): they then start and resume on its thread, and so
/// do the default actors they call.
///
/// Lifecycle: `EventLoop.start(name:)` makes a loop running on a thread of its own;
/// `stop()` (from any thread) ends it after the jobs already queued; `finished()` waits.
public final class EventLoop: TaskExecutor, @unchecked Sendable {
    private let epoll: Int32
    private let wake: Int32
    private let jobs = Mutex<[Job]>([])
    /// The queue's other buffer (loop thread only): `runJobs` swaps it in for the queue, so
    /// that both keep their capacity and a batch of jobs allocates nothing.
    private var spare: [Job] = []
    private var nextToken: UInt64 = 1
    private var sources: [UInt64: EventLoopSource] = [:]
    private var timers = TimerHeap()
    private var deadlines = DeadlineHeap()
    private let stopped = Atomic<Bool>(false)
    private let done = Mutex<(finished: Bool, waiters: [CheckedContinuation<Void, Never>])>((false, []))
    private let clock: LoopClockReading

    private static let wakeToken: UInt64 = 0

    /// Creates a loop; it runs once `run()` is called on some thread (or use `start(name:)`).
    /// - Parameter clock: where the loop reads the time (`.manual` for tests that move it).
    public init(clock: LoopClock = .continuous) throws {
        self.clock = LoopClockReading(clock)
        epoll = wb_epoll_create()
        wake = wb_eventfd_create()
        guard epoll >= 0, wake >= 0 else { throw EventLoopError.system("epoll/eventfd", errno) }
        guard wb_epoll_add(epoll, wake, WB_EPOLLIN, Self.wakeToken) == 0 else {
            throw EventLoopError.system("epoll_ctl", errno)
        }
    }

    deinit {
        close(epoll)
        close(wake)
    }

    /// Creates a loop and runs it on a new thread named `name`.
    public static func start(name: String, clock: LoopClock = .continuous) throws -> EventLoop {
        let loop = try EventLoop(clock: clock)
        let thread = Thread { loop.run() }
        thread.name = name
        thread.stackSize = 1 << 20
        thread.start()
        return loop
    }

    /// The loop's thread, once `run()` started.
    private let thread = Mutex<pthread_t?>(nil)

    /// Whether the caller runs on the loop's thread.
    public var inLoop: Bool {
        thread.withLock { $0.map { pthread_equal($0, pthread_self()) != 0 } ?? false }
    }

    /// Runs `job` on the loop thread soon (from any thread). Only a job from another thread
    /// that finds the queue empty wakes the loop: the loop drains the queue until it stays
    /// empty, so jobs queued from the loop itself need no wake-up.
    public func execute(_ job: @escaping @Sendable () -> Void) {
        submit(.closure(job))
    }

    /// Tasks that prefer this executor start and resume on the loop thread: they must not
    /// block or compute for long without an `await`. A task's job is queued as it is (no
    /// closure is made to run it).
    public func enqueue(_ job: consuming ExecutorJob) {
        submit(.task(UnownedJob(job)))
    }

    /// Something the loop thread runs once, in the order submitted.
    private enum Job: Sendable {
        case closure(@Sendable () -> Void)
        case task(UnownedJob)
    }

    private func submit(_ job: Job) {
        let wasEmpty = jobs.withLock { jobs in
            defer { jobs.append(job) }
            return jobs.isEmpty
        }
        if wasEmpty && !inLoop { _ = wb_eventfd_signal(wake) }
    }

    /// Registers `fd` for `events`; its readiness goes to `source` (held until deregistered).
    /// Loop thread only. Returns the registration's token.
    public func register(_ fd: Int32, events: UInt32, source: EventLoopSource) throws -> UInt64 {
        let token = nextToken
        nextToken += 1
        guard wb_epoll_add(epoll, fd, events, token) == 0 else { throw EventLoopError.system("epoll_ctl add", errno) }
        sources[token] = source
        return token
    }

    /// Changes the events watched for `fd`; loop thread only.
    public func modify(_ fd: Int32, token: UInt64, events: UInt32) {
        _ = wb_epoll_modify(epoll, fd, events, token)
    }

    /// Stops watching `fd` (call before closing it) and drops its source; loop thread only.
    public func deregister(_ fd: Int32, token: UInt64) {
        _ = wb_epoll_remove(epoll, fd)
        sources[token] = nil
    }

    /// Now, on the loop's clock: what every timer and deadline of the loop is measured
    /// against (any thread).
    public var now: ContinuousClock.Instant { clock.now }

    /// The wall-clock time on the loop's clock (any thread): the system's, or on a manual
    /// clock the time it started at moved on with it, so a time that leaves the process
    /// (JSON, SQL) agrees with the loop's timers.
    public var date: Date { clock.date }

    /// Moves a manual clock forward by `duration` and runs, on the loop thread, every timer
    /// and deadline that is then due (in deadline order, with the jobs they queue), before
    /// it returns. Only for a loop made with `LoopClock.manual`.
    public func advance(by duration: Duration) async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            execute {
                self.fireDue(now: self.clock.advance(by: duration))
                continuation.resume()
            }
        }
    }

    /// Runs `job` on the loop thread once `delay` has passed, unless the returned timer is
    /// cancelled first (from any thread). No thread or task exists per timer: the loop
    /// sleeps until the earliest one is due.
    @discardableResult
    public func schedule(after delay: Duration, _ job: @escaping @Sendable () -> Void) -> LoopTimer {
        let timer = LoopTimer()
        let entry = TimerHeap.Entry(deadline: now + max(.zero, delay), timer: timer, job: job)
        if inLoop { timers.insert(entry) } else { execute { self.timers.insert(entry) } }
        return timer
    }

    /// Timers waiting now, cancelled ones not yet swept included (loop thread; for tests).
    public var pendingTimers: Int { timers.count }

    /// Sets or moves `owner`'s one deadline (loop thread only): at `deadline` the loop calls
    /// `owner.deadlineReached(now:)`. No object is made per deadline (`DeadlineHeap`).
    public func setDeadline(_ owner: any LoopDeadlineOwner, at deadline: ContinuousClock.Instant) {
        deadlines.set(owner, at: deadline)
    }

    /// `owner`'s deadline, if it has one (loop thread only).
    public func deadline(of owner: any LoopDeadlineOwner) -> ContinuousClock.Instant? {
        deadlines.deadline(of: owner)
    }

    /// Removes `owner`'s deadline (loop thread only; call it before dropping the owner).
    public func clearDeadline(_ owner: any LoopDeadlineOwner) {
        deadlines.clear(owner)
    }

    /// Owners with a deadline now (loop thread; for tests).
    public var pendingDeadlines: Int { deadlines.count }

    /// Ends `run()` once the jobs queued before it have run (any thread).
    public func stop() {
        execute { self.stopped.store(true, ordering: .relaxed) }
    }

    /// Waits until `run()` has returned.
    public func finished() async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let over = done.withLock { state -> Bool in
                if state.finished { return true }
                state.waiters.append(continuation)
                return false
            }
            if over { continuation.resume() }
        }
    }

    /// The loop; returns after `stop()`.
    public func run() {
        thread.withLock { $0 = pthread_self() }
        var events = [wb_event](repeating: wb_event(), count: 256)
        while !stopped.load(ordering: .relaxed) {
            // Asleep until an event, a job or the earliest timer (-1: no timer is armed; on a
            // manual clock nothing comes due by waiting, and `advance(by:)` is a job).
            var timeout: Int32 = -1
            var earliest = timers.nextDeadline
            if let deadline = deadlines.nextDeadline, earliest.map({ deadline < $0 }) ?? true { earliest = deadline }
            if let next = earliest {
                let wait = next - now
                if wait <= .zero {
                    timeout = 0
                } else if !clock.isManual {
                    timeout = Int32(min(Int64(Int32.max), wait.roundedUpMilliseconds))
                }
            }
            let count = wb_epoll_wait(epoll, &events, Int32(events.count), timeout)
            if count > 0 {
                for index in 0..<Int(count) {
                    let event = events[index]
                    if event.token == Self.wakeToken {
                        _ = wb_eventfd_drain(wake)
                    } else {
                        sources[event.token]?.handle(events: event.events)
                    }
                }
            }
            runJobs()
            fireDue(now: now)
        }
        runJobs()
        sources.removeAll()
        timers = TimerHeap()
        deadlines = DeadlineHeap()
        let waiters = done.withLock { state -> [CheckedContinuation<Void, Never>] in
            state.finished = true
            defer { state.waiters.removeAll() }
            return state.waiters
        }
        waiters.forEach { $0.resume() }
    }

    /// Runs the timers and deadlines due at `now`, each followed by the jobs it queued.
    private func fireDue(now: ContinuousClock.Instant) {
        while let job = timers.popDue(now: now) {
            job()
            runJobs()
        }
        while let owner = deadlines.popDue(now: now) {
            owner.deadlineReached(now: now)
            runJobs()
        }
    }

    /// Runs the queued jobs, and those they queue, until the queue stays empty. A job may
    /// run the jobs itself (a timer's, through `fireDue`): the batch being run is local.
    private func runJobs() {
        while true {
            var batch = spare
            spare = []
            jobs.withLock { swap(&$0, &batch) }
            if batch.isEmpty {
                spare = batch
                return
            }
            for job in batch {
                switch job {
                case .closure(let run): run()
                case .task(let task): task.runSynchronously(on: asUnownedTaskExecutor())
                }
            }
            batch.removeAll(keepingCapacity: true)
            spare = batch
        }
    }
}

/// Failures of the loop's own system calls.
public enum EventLoopError: Error, CustomStringConvertible {
    /// A system call failed with errno.
    case system(String, Int32)

    public var description: String {
        switch self {
        case .system(let call, let code): "\(call) failed: \(String(cString: strerror(code)))"
        }
    }
}
