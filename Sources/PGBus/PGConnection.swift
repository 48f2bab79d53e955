import CLibPQ
import Foundation
import Loop
import Synchronization

/// One PostgreSQL connection, driven by an event loop.
///
/// Lifecycle: `connect(_:on:)` opens it; `close()` ends it (also on deinit). Without a loop
/// the connection runs one of its own (a thread); with one — say, the loop of an HTTP
/// server — its socket lives there, so a task that prefers that loop sends its statement,
/// gets its result and goes on without ever leaving the thread.
///
/// Statements from any task are pipelined: those submitted in one loop iteration go out
/// in one write, each prepared once per connection, and their results come back in order.
/// A failing statement fails alone. Cancelling the task of a statement drops it if it has
/// not been sent, else sends a cancel request (PQcancel) once the server works on it; the
/// statement ends with `CancellationError` and the connection stays usable.
///
/// A connection is not a pool: statements of different tasks interleave. Use
/// `withTransaction` (or a `PGPool` lease) when a sequence of statements must not.
public final class PGConnection: @unchecked Sendable {
    private let loop: EventLoop
    private let ownsLoop: Bool
    private let pipeline: PGPipeline
    private let outstandingCount = Atomic<Int>(0)

    /// Statements submitted and not yet finished (a pool picks the least busy connection).
    public var outstanding: Int { outstandingCount.load(ordering: .relaxed) }

    private init(loop: EventLoop, ownsLoop: Bool, callTimeout: Duration?) {
        self.loop = loop
        self.ownsLoop = ownsLoop
        self.pipeline = PGPipeline(loop: loop, callTimeout: callTimeout)
    }

    deinit {
        let pipeline = self.pipeline
        loop.execute { pipeline.close() }
        if ownsLoop { loop.stop() }
    }

    /// Opens a connection.
    /// - Parameters:
    ///   - configuration: where to connect; never logged.
    ///   - loop: the running loop to drive it; nil runs one of its own.
    /// - Throws: `PGError` with code `connectionFailed` (its debugDescription says why).
    public static func connect(_ configuration: PGConfiguration, on loop: EventLoop? = nil) async throws -> PGConnection {
        let handle = try await PGConnect.openOffLoop(configuration)
        let connection: PGConnection
        do {
            if let loop {
                connection = PGConnection(loop: loop, ownsLoop: false, callTimeout: configuration.callTimeout)
            } else {
                connection = PGConnection(loop: try EventLoop.start(name: "pgbus-\(configuration.applicationName)"), ownsLoop: true,
                                          callTimeout: configuration.callTimeout)
            }
        } catch {
            PQfinish(handle.pointer)
            throw PGError(.connectionFailed, detail: "\(error)")
        }
        let pipeline = connection.pipeline
        try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, Error>) in
            connection.loop.execute {
                continuation.resume(with: Result { try pipeline.attach(handle.pointer) })
            }
        }
        return connection
    }

    /// False once the connection broke or was closed; a pool discards such connections.
    public var isUsable: Bool { pipeline.usable.load(ordering: .relaxed) }

    /// Runs one statement with `$1...$n` parameters and returns its rows.
    /// - Parameters:
    ///   - sql: one SQL statement (its text never appears in errors).
    ///   - parameters: values for `$1...$n`; nil is SQL NULL.
    /// - Throws: `PGError` (`server` with the SQLSTATE, `connectionClosed`, or `timedOut`
    ///   when no answer came by the configuration's `callTimeout`: the connection is then
    ///   closed), or `CancellationError` when the task was cancelled.
    @discardableResult
    public func query(_ sql: String, _ parameters: [(any PGEncodable)?] = []) async throws -> PGQueryResult {
        let statement = PGStatement(sql: sql, parameters: parameters.map { $0?.pgParameter })
        let loop = self.loop, pipeline = self.pipeline
        outstandingCount.add(1, ordering: .relaxed)
        defer { outstandingCount.subtract(1, ordering: .relaxed) }
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { continuation in
                statement.continuation = continuation
                if Task.isCancelled {
                    statement.finish(.failure(CancellationError()))
                } else if loop.inLoop {
                    pipeline.submit(statement)
                } else {
                    loop.execute { pipeline.submit(statement) }
                }
            }
        } onCancel: {
            statement.cancelled.store(true, ordering: .relaxed)
            loop.execute { pipeline.cancel(statement) }
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
            await rollBack()
            throw error
        }
    }

    /// Sends `rollback` and waits for its answer, whether or not the calling task is
    /// cancelled (a cancelled transaction still leaves a clean connection); a failure is
    /// ignored (a broken connection is discarded by its pool).
    private func rollBack() async {
        let statement = PGStatement(sql: "rollback", parameters: [])
        let loop = self.loop, pipeline = self.pipeline
        outstandingCount.add(1, ordering: .relaxed)
        defer { outstandingCount.subtract(1, ordering: .relaxed) }
        _ = try? await withCheckedThrowingContinuation { continuation in
            statement.continuation = continuation
            if loop.inLoop { pipeline.submit(statement) } else { loop.execute { pipeline.submit(statement) } }
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

    /// Closes the connection; statements already submitted finish first, later ones fail
    /// with `connectionClosed`.
    public func close() async {
        let pipeline = self.pipeline
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            loop.execute {
                pipeline.closeWhenIdle { continuation.resume() }
            }
        }
        if ownsLoop { loop.stop() }
    }
}
