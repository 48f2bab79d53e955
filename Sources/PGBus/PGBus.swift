/// PGBus: PostgreSQL over libpq for Swift concurrency.
///
/// PGBus is a reusable client library: connections, a pool, parameterized queries, and
/// LISTEN/NOTIFY as scoped async sequences that survive reconnects. It knows nothing of
/// locations, phones or agents.
///
/// ## Lifecycle
/// - `PGConnection.connect(_:)` opens one connection; `close()` ends it.
/// - `PGPool` opens up to `size` connections on demand and hands them out with
///   `withConnection(_:)`; `shutdown()` closes them.
/// - `PGListener.run()` keeps one dedicated LISTEN connection alive until `shutdown()` or
///   until its task is cancelled; `listen(on:_:)` scopes a consumer.
///
/// ## Concurrency
/// - Pool connections run on an event loop (`Loop`): the one given to the pool — shared
///   with an HTTP server, so that a handler's request, queries and response stay on one
///   thread — or one of their own. libpq runs in non-blocking pipeline mode there; opening
///   a connection (DNS, TLS) happens on a short-lived thread, never on a loop. Swift tasks
///   only await continuations, so no thread ever blocks on the network.
/// - Statements on one connection are pipelined and answered in submission order; each
///   distinct SQL text is prepared once per connection.
/// - The listener's connection runs on a loop too (the one given, or its own): LISTEN,
///   UNLISTEN and the heartbeat go out as non-blocking commands with timeouts on the
///   loop's timers, and notifications reach consumers on that loop.
/// - Cancelling a task that awaits a statement sends PQcancel for that statement only; the
///   connection stays usable.
///
/// ## Invariants
/// - Errors (`PGError`) carry a stable code and the SQLSTATE; their `description` never
///   holds SQL text, parameter values or the server's message.
/// - Server notices are dropped, never printed: they can quote data.
/// - A NOTIFY payload of 8000 bytes or more is refused before it reaches the server.
/// - A notification is a hint. After any (re)connect of the listener, and whenever a
///   consumer's buffer overflows, the consumer gets `.resync` and must re-read its tables.
import CLibPQ

/// Facts about the libpq this module was linked against.
public enum LibPQ {
    /// The libpq version as an integer, `major * 10000 + minor` (15.18 is 150018).
    public static var version: Int { Int(PQlibVersion()) }

    /// Whether this libpq was built thread-safe, which PGBus requires.
    public static var isThreadSafe: Bool { PQisthreadsafe() == 1 }
}
