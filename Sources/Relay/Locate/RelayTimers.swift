import Lifecycle
import Loop

/// One-shot timers for the instance's driver and the push scheduler: on the relay's event loop
/// when there is one (no thread, task or dispatch timer per timer: a locate arms and
/// cancels several), else as sleeping tasks (unit tests without a loop).
///
/// A fired timer's body runs in a task of `events`, the tasks in which events reach the
/// instance's driver (a timer's body, a socket's queue: `DeviceSession`): each is counted
/// until it ends, and the instance's shutdown finishes them after the driver's calls
/// (`RelayService`, "Lifecycle"); a timer that fires after that runs nothing.
struct RelayTimers: Sendable {
    let loop: EventLoop?
    /// The tasks the driver's events run in (shared by every copy).
    let events: OwnedTasks

    /// Timers on `loop` (nil: sleeping tasks), with tasks of their own.
    init(loop: EventLoop?, events: OwnedTasks = OwnedTasks()) {
        self.loop = loop
        self.events = events
    }

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
            // Owners: the returned handle, whose `cancel()` cancels it, and `events`.
            return Handle(timer: nil, task: events.spawn {
                guard (try? await Task.sleep(for: delay)) != nil else { return }
                await Logger.untraced { await body() }
            })
        }
        // Owner of the timer: the returned handle; of the body's task, once it fired:
        // `events` (it cannot be cancelled halfway: each body is one event of its owner).
        let events = self.events
        return Handle(timer: loop.schedule(after: delay) { events.spawn(executorPreference: loop) { await body() } }, task: nil)
    }
}
