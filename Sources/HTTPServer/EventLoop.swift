import CSystem
import Glibc
import Synchronization

/// One epoll thread: it owns every socket registered with it and runs jobs submitted from
/// any thread (woken through an eventfd, never by polling).
///
/// Everything registered with the loop is touched only on its thread; other threads reach
/// it through `execute(_:)`. Readiness goes to one `onEvent` callback with the token given
/// at registration, so the owner keeps the only table of what is registered.
final class EventLoop: TaskExecutor, @unchecked Sendable {
    private let epoll: Int32
    private let wake: Int32
    private let jobs = Mutex<[@Sendable () -> Void]>([])
    private var nextToken: UInt64 = 1
    /// Called on the loop thread for every readiness event: the token and the epoll bits.
    var onEvent: ((UInt64, UInt32) -> Void)?
    private var stopped = false
    /// Called on the loop thread about every `tickInterval` (timeouts, keep-alives).
    var onTick: (() -> Void)?
    /// How often `onTick` runs.
    let tickInterval: Duration = .milliseconds(250)

    private static let wakeToken: UInt64 = 0

    init() throws {
        epoll = wb_epoll_create()
        wake = wb_eventfd_create()
        guard epoll >= 0, wake >= 0 else { throw HTTPServerError.system("epoll/eventfd", errno) }
        guard wb_epoll_add(epoll, wake, WB_EPOLLIN, Self.wakeToken) == 0 else {
            throw HTTPServerError.system("epoll_ctl", errno)
        }
    }

    deinit {
        close(epoll)
        close(wake)
    }

    /// The loop's thread, once `run()` started.
    private let thread = Mutex<pthread_t?>(nil)

    /// Whether the caller runs on the loop's thread.
    var inLoop: Bool {
        thread.withLock { $0.map { pthread_equal($0, pthread_self()) != 0 } ?? false }
    }

    /// Runs `job` on the loop thread soon (from any thread). Only a job from another thread
    /// that finds the queue empty wakes the loop: the loop drains the queue until it stays
    /// empty, so jobs queued from the loop itself need no wake-up.
    func execute(_ job: @escaping @Sendable () -> Void) {
        let wasEmpty = jobs.withLock { jobs in
            defer { jobs.append(job) }
            return jobs.isEmpty
        }
        if wasEmpty && !inLoop { _ = wb_eventfd_signal(wake) }
    }

    /// Tasks that prefer this executor (request handlers) start and resume on the loop
    /// thread: a handler that answers at once never wakes another thread. Handlers must
    /// therefore not block or compute for long without an `await`.
    func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        execute { job.runSynchronously(on: self.asUnownedTaskExecutor()) }
    }

    /// Registers `fd` for `events`; loop thread only. Returns the token its events carry.
    func register(_ fd: Int32, events: UInt32) throws -> UInt64 {
        let token = nextToken
        nextToken += 1
        guard wb_epoll_add(epoll, fd, events, token) == 0 else { throw HTTPServerError.system("epoll_ctl add", errno) }
        return token
    }

    /// Changes the events watched for `fd`; loop thread only.
    func modify(_ fd: Int32, token: UInt64, events: UInt32) {
        _ = wb_epoll_modify(epoll, fd, events, token)
    }

    /// Stops watching `fd` (call before closing it); loop thread only.
    func deregister(_ fd: Int32) {
        _ = wb_epoll_remove(epoll, fd)
    }

    /// Ends `run()` after the current iteration; loop thread only.
    func stop() { stopped = true }

    /// The loop; returns after `stop()`.
    func run() {
        thread.withLock { $0 = pthread_self() }
        var events = [wb_event](repeating: wb_event(), count: 256)
        let tickMilliseconds = Int32(tickInterval.components.attoseconds / 1_000_000_000_000_000)
        var nextTick = ContinuousClock.now + tickInterval
        while !stopped {
            let count = wb_epoll_wait(epoll, &events, Int32(events.count), tickMilliseconds)
            if count > 0 {
                for index in 0..<Int(count) {
                    let event = events[index]
                    if event.token == Self.wakeToken {
                        _ = wb_eventfd_drain(wake)
                    } else {
                        onEvent?(event.token, event.events)
                    }
                }
            }
            runJobs()
            let now = ContinuousClock.now
            if now >= nextTick {
                nextTick = now + tickInterval
                onTick?()
            }
        }
        runJobs()
    }

    private func runJobs() {
        while true {
            let batch = jobs.withLock { jobs -> [@Sendable () -> Void] in
                defer { jobs.removeAll(keepingCapacity: true) }
                return jobs
            }
            if batch.isEmpty { return }
            for job in batch { job() }
        }
    }
}

/// Failures of the server itself (binding, system calls), never of a client.
public enum HTTPServerError: Error, CustomStringConvertible {
    /// A system call failed with errno.
    case system(String, Int32)

    public var description: String {
        switch self {
        case .system(let call, let code): "\(call) failed: \(String(cString: strerror(code)))"
        }
    }
}
