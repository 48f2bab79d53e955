import Loop

/// One-shot timers for the instance's driver and the push scheduler: on the relay's event loop
/// when there is one (no thread, task or dispatch timer per timer: a locate arms and
/// cancels several), else as sleeping tasks (unit tests without a loop).
struct RelayTimers: Sendable {
    let loop: EventLoop?

    /// A timer that can be cancelled from any thread.
    struct Handle: Sendable {
        fileprivate let timer: LoopTimer?
        fileprivate let task: Task<Void, Never>?

        /// Stops the timer if it has not fired.
        func cancel() {
            timer?.cancel()
            task?.cancel()
        }
    }

    /// Runs `body` (in a new task, on the loop when there is one) after `delay`.
    func after(_ delay: Duration, _ body: @escaping @Sendable () async -> Void) -> Handle {
        guard let loop else {
            // Owner: the returned handle, whose `cancel()` cancels it.
            return Handle(timer: nil, task: Task {
                guard (try? await Task.sleep(for: delay)) != nil else { return }
                await Logger.untraced { await body() }
            })
        }
        // Owner of the timer: the returned handle; the body's task, once it fired, is the
        // body's own (it cannot be cancelled halfway: each body is one event of its owner).
        return Handle(timer: loop.schedule(after: delay) { Task(executorPreference: loop) { await body() } }, task: nil)
    }
}
