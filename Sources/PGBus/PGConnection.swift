import CLibPQ
import Foundation
import Synchronization

/// One PostgreSQL connection, driven by its own thread.
///
/// Lifecycle: `connect(_:)` opens it; `close()` ends it (also on deinit). Statements from
/// any task run one at a time in submission order on the connection's thread, with libpq
/// in non-blocking mode, so no Swift concurrency thread ever waits on the network.
/// Cancelling the task of a running statement sends a cancel request (PQcancel) to the
/// server; the statement ends with `CancellationError` and the connection stays usable.
///
/// A connection is not a pool: statements of different tasks interleave. Use
/// `withTransaction` (or a `PGPool` lease) when a sequence of statements must not.
public final class PGConnection: @unchecked Sendable {
    private let worker: PGWorker
    /// The libpq connection; touched only on the worker thread.
    private var handle: OpaquePointer?
    /// PQcancel's handle, usable from any thread, and the id of the statement running now
    /// (0 when idle), so that a cancel never hits another task's statement.
    private let cancelState = Mutex<(handle: CancelHandle?, running: UInt64)>((nil, 0))
    /// Ids for statements, to match cancellations with them.
    private let nextStatementID = Atomic<UInt64>(1)
    /// Whether a statement failed in a way that leaves the connection unusable.
    private let broken = Atomic<Bool>(false)

    private final class CancelHandle: @unchecked Sendable {
        let pointer: OpaquePointer
        init(_ pointer: OpaquePointer) { self.pointer = pointer }
        deinit { PQfreeCancel(pointer) }
    }

    private init(worker: PGWorker) {
        self.worker = worker
    }

    deinit {
        if let handle {
            let owned = OwnedHandle(pointer: handle)
            worker.submit { PQfinish(owned.pointer) }
        }
        worker.stop()
    }

    /// A libpq handle handed to the worker thread for its final PQfinish.
    private struct OwnedHandle: @unchecked Sendable { let pointer: OpaquePointer }

    /// Opens a connection.
    /// - Parameter configuration: where to connect; never logged.
    /// - Throws: `PGError` with code `connectionFailed` (its debugDescription says why).
    public static func connect(_ configuration: PGConfiguration) async throws -> PGConnection {
        let connection = PGConnection(worker: PGWorker(name: "pgbus-\(configuration.applicationName)"))
        try await connection.onWorker { connection in
            let handle = try PGConnection.openHandle(configuration)
            connection.handle = handle
            connection.cancelState.withLock { $0.handle = PQgetCancel(handle).map(CancelHandle.init) }
        }
        return connection
    }

    /// Opens a libpq connection in non-blocking mode (blocking the calling thread, which
    /// is always a PGBus thread, for at most the connect timeout).
    /// Server notices are dropped: they can quote data, and nothing here reads them.
    static func openHandle(_ configuration: PGConfiguration) throws -> OpaquePointer {
        let parameters = configuration.libpqParameters
        let handle = withCStringArray(parameters.map(\.0)) { keys in
            withCStringArray(parameters.map(\.1)) { values in PQconnectdbParams(keys, values, 1) }
        }
        guard let handle else { throw PGError(.connectionFailed, detail: "out of memory") }
        guard PQstatus(handle) == CONNECTION_OK else {
            let error = PGSocket.connectionError(handle)
            PQfinish(handle)
            throw PGError(.connectionFailed, detail: error.detail)
        }
        PQsetNoticeProcessor(handle, { _, _ in }, nil)
        PQsetnonblocking(handle, 1)
        return handle
    }

    /// False once the connection broke or was closed; a pool discards such connections.
    public var isUsable: Bool { !broken.load(ordering: .relaxed) }

    /// Runs one statement with `$1...$n` parameters and returns its rows.
    /// - Parameters:
    ///   - sql: one SQL statement (its text never appears in errors).
    ///   - parameters: values for `$1...$n`; nil is SQL NULL.
    /// - Throws: `PGError` (`server` with the SQLSTATE, or `connectionClosed`), or
    ///   `CancellationError` when the task was cancelled.
    @discardableResult
    public func query(_ sql: String, _ parameters: [(any PGEncodable)?] = []) async throws -> PGQueryResult {
        let texts = parameters.map { $0?.pgParameter }
        let statement = Statement(id: nextStatementID.wrappingAdd(1, ordering: .relaxed).oldValue)
        return try await withTaskCancellationHandler {
            try await onWorker { connection in
                try connection.run(sql, texts, statement)
            }
        } onCancel: {
            statement.cancelled.store(true, ordering: .sequentiallyConsistent)
            self.cancel(statement)
        }
    }

    /// Sends `NOTIFY channel, payload` (through `pg_notify`, so any channel name works).
    /// - Throws: `payloadTooLarge` for 8000 bytes or more, before contacting the server.
    public func notify(channel: String, payload: String) async throws {
        try PGConnection.checkPayload(payload)
        try await query("select pg_notify($1, $2)", [channel, payload])
    }

    /// PostgreSQL refuses NOTIFY payloads of 8000 bytes or more.
    public static let maximumPayloadBytes = 7999

    static func checkPayload(_ payload: String) throws {
        if payload.utf8.count > maximumPayloadBytes {
            throw PGError(.payloadTooLarge, detail: "\(payload.utf8.count) bytes")
        }
    }

    /// Runs `body` inside BEGIN ... COMMIT; any error (or cancellation) rolls back.
    public func withTransaction<T: Sendable>(_ body: (PGConnection) async throws -> T) async throws -> T {
        try await query("begin")
        do {
            let value = try await body(self)
            try await query("commit")
            return value
        } catch {
            // Roll back even when the task is cancelled: the connection must be clean.
            try? await Task { try await self.query("rollback") }.value
            throw error
        }
    }

    /// Runs `body` in a transaction as PostgREST runs a request with a verified JWT:
    /// `set local role authenticated` (or the claims' role) and the claims in
    /// `request.jwt.claims`, so RLS and `auth.uid()` see that user.
    /// - Parameters:
    ///   - claims: the JWT claims as JSON (an object with at least `sub` and `role`).
    ///   - body: the statements to run as that user.
    public func asUser<T: Sendable>(claims: PGJSON, _ body: (PGConnection) async throws -> T) async throws -> T {
        try await withTransaction { connection in
            try await connection.query(
                "select set_config('role', coalesce($1::jsonb ->> 'role', 'authenticated'), true),"
                    + " set_config('request.jwt.claims', $1::text, true)", [claims])
            return try await body(connection)
        }
    }

    /// Closes the connection; statements already queued finish first.
    public func close() async {
        try? await onWorker { connection in
            if let handle = connection.handle {
                connection.cancelState.withLock { $0.handle = nil }
                PQfinish(handle)
                connection.handle = nil
            }
            connection.broken.store(true, ordering: .relaxed)
        }
        worker.stop()
    }

    /// One statement's identity and whether its task was cancelled.
    private final class Statement: Sendable {
        let id: UInt64
        let cancelled = Atomic<Bool>(false)
        init(id: UInt64) { self.id = id }
    }

    /// The thread that sends cancel requests: PQcancel opens a new TCP connection to the
    /// server and waits for it, so it never runs on the thread that cancels (an event loop
    /// or a Swift concurrency thread). One for the process: cancels are rare and short.
    private static let canceller = PGWorker(name: "pgbus-cancel")

    /// Asks the server to cancel `statement` if it is the one running now (any thread;
    /// returns at once, the request goes out from the canceller thread).
    private func cancel(_ statement: Statement) {
        Self.canceller.submit { [self] in
            cancelState.withLock { state in
                guard state.running == statement.id, let handle = state.handle else { return }
                var buffer = [CChar](repeating: 0, count: 256)
                _ = PQcancel(handle.pointer, &buffer, Int32(buffer.count))
            }
        }
    }

    /// Runs `job` on the connection's thread and returns its result.
    private func onWorker<T: Sendable>(_ job: @escaping @Sendable (PGConnection) throws -> T) async throws -> T {
        try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<T, Error>) in
            let accepted = worker.submit { [self] in
                continuation.resume(with: Result { try job(self) })
            }
            if !accepted { continuation.resume(throwing: PGError(.connectionClosed, detail: "connection closed")) }
        }
    }

    /// Sends one statement and waits for its results; on the worker thread.
    private func run(_ sql: String, _ parameters: [String?], _ statement: Statement) throws -> PGQueryResult {
        guard let handle, !broken.load(ordering: .relaxed) else {
            throw PGError(.connectionClosed, detail: "connection closed")
        }
        cancelState.withLock { $0.running = statement.id }
        defer { cancelState.withLock { $0.running = 0 } }
        // Cancelled before it started (the cancel request found it not yet running).
        if statement.cancelled.load(ordering: .sequentiallyConsistent) { throw CancellationError() }
        let sent = withOptionalCStringArray(parameters) { values in
            PQsendQueryParams(handle, sql, Int32(parameters.count), nil, values, nil, nil, 0)
        }
        if sent == 0 {
            broken.store(true, ordering: .relaxed)
            throw PGSocket.connectionError(handle)
        }
        let results: [OpaquePointer]
        do {
            results = try PGSocket.collectResults(handle)
        } catch {
            broken.store(true, ordering: .relaxed)
            throw error
        }
        defer { results.forEach { PQclear($0) } }
        if let failure = results.lazy.compactMap(PGSocket.resultError).first {
            if failure.isQueryCanceled, statement.cancelled.load(ordering: .sequentiallyConsistent) {
                throw CancellationError()
            }
            if failure.code == .connectionClosed { broken.store(true, ordering: .relaxed) }
            throw failure
        }
        guard let last = results.last else { throw PGError(.protocolViolation, detail: "no result") }
        return PGSocket.decode(last)
    }
}

/// Calls `body` with a NULL-terminated array of C strings.
func withCStringArray<R>(_ strings: [String], _ body: (UnsafePointer<UnsafePointer<CChar>?>) -> R) -> R {
    withOptionalCStringArray(strings.map(Optional.some) + [nil], body)
}

/// Calls `body` with an array of C strings where nil stays a NULL pointer.
func withOptionalCStringArray<R>(_ strings: [String?], _ body: (UnsafePointer<UnsafePointer<CChar>?>) -> R) -> R {
    let pointers: [UnsafeMutablePointer<CChar>?] = strings.map { $0.map { strdup($0)! } }
    defer { pointers.forEach { free($0) } }
    return pointers.map { UnsafePointer($0) }.withUnsafeBufferPointer { body($0.baseAddress!) }
}
