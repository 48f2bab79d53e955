import Synchronization

/// Runs services in one order and stops them in the reverse order, as swift-service-lifecycle's
/// `ServiceGroup` does.
///
/// `start()` starts the services one after the other, each one's `start()` awaited before
/// the next, and once every one has started runs them all, each `run()` in a child task: a
/// start that fails (a port that cannot be bound) keeps every `run()` from beginning.
/// `run()` waits until the group has stopped. `shutdown()` stops it: every started service in reverse order, each
/// one's `shutdown()` awaited, then its `run()` cancelled and awaited, before the service
/// started before it is stopped. A service that ends early — its `run()` returns or throws
/// before the group stopped it — is logged, and the group shuts down the same way; `run()`
/// then says which one (`Ending`).
///
/// The group lives in one task of its own, which `start()` starts and `run()` awaits; each
/// service's `run()` is a child task of it. `start()` and `shutdown()` may each be called more
/// than once (the later calls change nothing); a group shut down before it started stops
/// every service at once (`Service`), and a later `start()` starts none.
public final class ServiceGroup: Sendable {
    /// Where the group reports what went wrong: the event (`service_start_failed`,
    /// `service_ended_early`, `service_failed`, `service_failed_stopping`), the service's name,
    /// and the error when there is one.
    public typealias Log = @Sendable (_ event: String, _ service: String, _ error: (any Error)?) -> Void

    private enum Phase {
        case idle, started, stopped
    }

    private struct State {
        var phase = Phase.idle
        var task: Task<Void, Never>?
        /// The first service that ended before the group stopped it.
        var endedEarly: String?
    }

    /// How the group stopped.
    public enum Ending: Sendable, Equatable {
        /// `shutdown()` stopped it (or a failed start did).
        case shutDown
        /// This service's `run()` returned or threw before the group stopped it, and the
        /// group stopped the others (a process should exit non-zero: it did not choose to stop).
        case serviceEnded(String)
    }

    /// One service's run, as the group sees it.
    private final class Run: Sendable {
        /// The group is stopping the service (fired before its `shutdown()`).
        let stopping = Signal()
        /// Its `shutdown()` returned: `run()` is cancelled.
        let cancel = Signal()
        /// Its `run()` returned.
        let ended = Signal()
    }

    private let services: [any Service]
    private let runs: [Run]
    private let log: Log
    private let state = Mutex(State())
    /// Fired by `shutdown()`, by a service's early end or by a failed start.
    private let stopRequested = Signal()
    /// Fired once every started service has stopped.
    private let stopped = Signal()

    /// A group of `services`, in start order; `log` hears what went wrong.
    public init(_ services: [any Service], log: @escaping Log = { _, _, _ in }) {
        self.services = services
        self.runs = services.map { _ in Run() }
        self.log = log
    }

    /// Starts every service in order and returns once the last one's `start()` returned and
    /// every `run()` has begun. Throws the first error a `start()` throws, once the services
    /// started before it have stopped in reverse (none of them ran). A group shut down
    /// meanwhile starts no more services, runs none, and returns.
    public func start() async throws {
        let first = state.withLock { state -> Bool in
            guard state.phase == .idle else { return false }
            state.phase = .started
            return true
        }
        guard first else { return }
        let result = await withCheckedContinuation { (started: CheckedContinuation<Result<Void, any Error>, Never>) in
            // Owner: the group, which keeps the task in its state; `run()` awaits it.
            let task = Task { await self.body(started) }
            state.withLock { $0.task = task }
        }
        try result.get()
    }

    /// Waits until every started service has stopped (after `shutdown()` or an early end);
    /// how the group stopped.
    @discardableResult
    public func run() async -> Ending {
        await stopped.wait()
        await state.withLock { $0.task }?.value
        return state.withLock { $0.endedEarly }.map(Ending.serviceEnded) ?? .shutDown
    }

    /// Stops the group (see the type's overview) and returns once every service has stopped.
    public func shutdown() async {
        let notStarted = state.withLock { state -> Bool in
            guard state.phase == .idle else { return false }
            state.phase = .stopped
            return true
        }
        guard !notStarted else {
            for service in services.reversed() { await service.shutdown() }
            stopped.fire()
            return
        }
        stopRequested.fire()
        await run()
    }

    /// The group's task: starts the services, waits for a stop, stops them in reverse.
    private func body(_ started: CheckedContinuation<Result<Void, any Error>, Never>) async {
        var failure: (any Error)?
        await withTaskGroup(of: Void.self) { group in
            var count = 0
            for service in services {
                if stopRequested.hasFired { break }
                do { try await service.start() } catch {
                    log("service_start_failed", service.name, error)
                    failure = error
                    break
                }
                count += 1
            }
            let running = failure == nil && !stopRequested.hasFired
            if running {
                for index in services.indices { group.addTask { await self.run(index) } }
            }
            if failure == nil {
                started.resume(returning: .success(()))
                await stopRequested.wait()
            }
            for index in (0..<count).reversed() { await stop(index, running: running) }
        }
        if let failure { started.resume(returning: .failure(failure)) }
        stopped.fire()
    }

    /// Stops one service: its graceful `shutdown()`, then the cancellation of its `run()`
    /// (when the services ran), whose end it awaits.
    private func stop(_ index: Int, running: Bool) async {
        let run = runs[index]
        run.stopping.fire()
        await services[index].shutdown()
        run.cancel.fire()
        if running { await run.ended.wait() }
    }

    /// Runs one service's `run()` until the group cancels it; an end before the group began
    /// to stop the service is an early end.
    private func run(_ index: Int) async {
        let service = services[index], run = runs[index]
        await withTaskGroup(of: Void.self) { inner in
            inner.addTask {
                do {
                    try await service.run()
                    if !run.stopping.hasFired { self.endedEarly(service.name, nil) }
                } catch {
                    if !run.stopping.hasFired {
                        self.endedEarly(service.name, error)
                    } else if !(error is CancellationError) {
                        self.log("service_failed_stopping", service.name, error)
                    }
                }
            }
            await run.cancel.wait()
            inner.cancelAll()
        }
        run.ended.fire()
    }

    private func endedEarly(_ name: String, _ error: (any Error)?) {
        log(error == nil ? "service_ended_early" : "service_failed", name, error)
        state.withLock { state in
            // A service that ends after a shutdown began was stopped, not early.
            if state.endedEarly == nil, !stopRequested.hasFired { state.endedEarly = name }
        }
        stopRequested.fire()
    }
}
