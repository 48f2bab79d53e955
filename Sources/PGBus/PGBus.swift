/// PGBus: PostgreSQL over libpq for Swift concurrency.
///
/// PGBus is a reusable client library: connections, parameterized queries, and
/// LISTEN/NOTIFY as async sequences. It knows nothing of locations, phones or agents.
///
/// Lifecycle, concurrency and invariants are documented on each type as it lands; the
/// invariants that hold for the whole module:
/// - no Swift concurrency thread ever blocks on the network;
/// - errors never carry SQL text or parameter values in their `description`;
/// - a notification is a hint: consumers re-read their tables after a reconnect.
import CLibPQ

/// Facts about the libpq this module was linked against.
public enum LibPQ {
    /// The libpq version as an integer, `major * 10000 + minor` (15.18 is 150018).
    public static var version: Int { Int(PQlibVersion()) }

    /// Whether this libpq was built thread-safe, which PGBus requires.
    public static var isThreadSafe: Bool { PQisthreadsafe() == 1 }
}
