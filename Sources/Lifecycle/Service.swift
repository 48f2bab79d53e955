/// A long-lived part of a process that a `ServiceGroup` runs: a server, a connection, a
/// periodic job, or only a step at shutdown (a pool to close).
///
/// What the group does with it, in order:
/// 1. `start()`: brings up what must be up before the next service starts (bind a port,
///    start a transport) and returns; a throw ends the group's start, and the services
///    started before it are stopped in reverse, none of them having run.
/// 2. `run()`, in a child task of the group, once every service has started: runs until the
///    group stops the service. Returning or throwing before that is an early end, which the
///    group logs and answers with its shutdown.
/// 3. `shutdown()`, when the group stops (in reverse order of the start): the graceful part
///    — finish what is under way, start nothing new — returning when it is done. The group
///    then cancels `run()`'s task and waits for `run()` to return, so `run()` must return
///    promptly once cancelled.
///
/// A group shut down before it started calls `shutdown()` of every service without
/// `start()` or `run()`: it then releases what the service's creator set up.
public protocol Service: Sendable {
    /// The service's name in the group's log lines.
    var name: String { get }

    /// Brings up what the services started after this one need; nothing by default.
    func start() async throws

    /// Runs until cancelled; by default it only waits for the cancellation (a service that
    /// is a step at shutdown).
    func run() async throws

    /// Stops gracefully and returns when the service's work is done; nothing by default (a
    /// service that stops by the cancellation of `run()` alone).
    func shutdown() async
}

extension Service {
    /// Nothing to bring up.
    public func start() async throws {}

    /// Waits until the task is cancelled.
    public func run() async throws { await untilCancelled() }

    /// Nothing to finish: the cancellation of `run()` stops the service.
    public func shutdown() async {}
}

/// Returns once the calling task is cancelled (at once if it already is).
public func untilCancelled() async {
    let cancelled = Signal()
    await withTaskCancellationHandler {
        await cancelled.wait()
    } onCancel: {
        cancelled.fire()
    }
}
