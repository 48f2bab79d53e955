import Synchronization

/// The tasks one owner starts that must run unstructured — a fired timer's body, a batch
/// made for callers that each wait for it, a socket's queue of events — each counted from its
/// start to its end, so that the owner's shutdown can wait for them (`idle()`, `finish()`).
///
/// Starting one costs a lock around a counter besides the task itself: no actor hop.
public final class OwnedTasks: Sendable {
    private struct State {
        var running = 0
        var finished = false
        var waiters: [CheckedContinuation<Void, Never>] = []
    }

    private let state = Mutex(State())

    /// An owner with no task yet.
    public init() {}

    /// Tasks running now.
    public var running: Int { state.withLock { $0.running } }

    /// Starts `body` in a task of its own, preferring `executor` when one is given, counted
    /// until it returns. Nothing starts once `finish()` was called: then nil.
    @discardableResult
    public func spawn(executorPreference executor: (any TaskExecutor)? = nil,
                      _ body: @escaping @Sendable () async -> Void) -> Task<Void, Never>? {
        let admitted = state.withLock { state -> Bool in
            guard !state.finished else { return false }
            state.running += 1
            return true
        }
        guard admitted else { return nil }
        // Owner: this value, which counts the task until its body returns (`ended()`).
        return Task(executorPreference: executor) {
            await body()
            self.ended()
        }
    }

    /// Returns once no task runs (tasks started meanwhile are waited for too).
    public func idle() async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let none = state.withLock { state -> Bool in
                if state.running > 0 { state.waiters.append(continuation) }
                return state.running == 0
            }
            if none { continuation.resume() }
        }
    }

    /// No task starts from now on (`spawn` returns nil); returns once those running ended.
    public func finish() async {
        state.withLock { $0.finished = true }
        await idle()
    }

    private func ended() {
        let waiters = state.withLock { state -> [CheckedContinuation<Void, Never>] in
            state.running -= 1
            guard state.running == 0 else { return [] }
            defer { state.waiters = [] }
            return state.waiters
        }
        waiters.forEach { $0.resume() }
    }
}
