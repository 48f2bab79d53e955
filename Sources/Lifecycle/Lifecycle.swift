/// Lifecycle: long-lived parts of a process as services, started in one order and stopped
/// in the reverse, and the tasks that must run unstructured kept by a named owner.
///
/// Modelled on swift-service-lifecycle (its `Service` and `ServiceGroup`), with one step
/// more: a service can bring something up before the next starts (`start()`), so that a
/// group's start can fail at once (a port that cannot be bound) and its order means
/// something. It knows nothing of HTTP, Postgres or the relay.
///
/// ## Lifecycle
/// - `ServiceGroup.start()` starts each service in turn (`start()`), then runs them all, each
///   `run()` in a child task of the group's one task; `shutdown()` stops them in reverse
///   order, each `shutdown()` awaited, then its `run()` cancelled and awaited, before the next.
/// - A service whose `run()` returns or throws before the group stopped it ends early: the
///   group logs it and shuts down.
/// - `OwnedTasks` counts tasks that must outlive the event that started them (a fired
///   timer's body, a coalesced batch); its owner awaits `idle()` or `finish()` at shutdown.
///
/// ## Concurrency
/// - The group's state and `OwnedTasks`' count sit behind a `Mutex`: no actor, so starting
///   a counted task costs no hop.
/// - The group's task prefers no executor; a service that must run on one (an event loop)
///   says so inside its `run()` (`withTaskExecutorPreference`).
///
/// ## Invariants
/// - Every task the module starts is awaited by its owner: the group's by `run()`, each
///   service's by the group, each counted task by `idle()`/`finish()`.
/// - A service is stopped at most once, and only after every service started after it.
public enum Lifecycle {}
