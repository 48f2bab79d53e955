import Foundation

/// A dedicated OS thread that runs jobs one at a time, in order.
///
/// The canceller uses one for PQcancel, which opens a TCP connection and waits: it must
/// run neither on an event loop nor on a Swift concurrency thread. Jobs are plain closures.
final class PGWorker: @unchecked Sendable {
    private let condition = NSCondition()
    private var jobs: [@Sendable () -> Void] = []
    private var stopping = false

    /// Starts the thread.
    /// - Parameter name: the thread's name, as shown by debuggers and `top -H`.
    init(name: String) {
        let thread = Thread { [self] in self.loop() }
        thread.name = name
        thread.stackSize = 1 << 20
        thread.start()
    }

    /// Queues a job; false when the worker is stopping (the job will never run).
    @discardableResult
    func submit(_ job: @escaping @Sendable () -> Void) -> Bool {
        condition.lock()
        defer { condition.unlock() }
        guard !stopping else { return false }
        jobs.append(job)
        condition.signal()
        return true
    }

    /// Lets queued jobs finish, then ends the thread. Later submissions are refused.
    func stop() {
        condition.lock()
        stopping = true
        condition.signal()
        condition.unlock()
    }

    private func loop() {
        while true {
            condition.lock()
            while jobs.isEmpty && !stopping { condition.wait() }
            if jobs.isEmpty {
                condition.unlock()
                return
            }
            let job = jobs.removeFirst()
            condition.unlock()
            job()
        }
    }
}
