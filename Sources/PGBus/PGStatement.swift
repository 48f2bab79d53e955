import Synchronization

/// One statement on its way through a connection's pipeline: its text and parameters, the
/// continuation of the task waiting for it, and what has come back so far.
///
/// Created on the caller's thread with its continuation, then touched only on the loop
/// thread (except `cancelled`, set by the cancellation handler from any thread).
final class PGStatement: @unchecked Sendable {
    /// Where a statement sent to the server is in its results.
    enum Phase {
        /// Waiting for the result of its PQsendPrepare (then a NULL).
        case prepare
        /// Waiting for its own results (then a NULL).
        case query
        /// Waiting for the PGRES_PIPELINE_SYNC that ends it.
        case sync
    }

    let sql: String
    let parameters: [String?]
    var continuation: CheckedContinuation<PGQueryResult, Error>?
    /// Set when the waiting task was cancelled.
    let cancelled = Atomic<Bool>(false)
    var phase: Phase = .query
    /// The last result with rows or a command status, decoded.
    var result: PGQueryResult?
    /// The first failure among its results.
    var failure: PGError?
    /// Whether a cancel request was sent for it.
    var cancelRequested = false
    /// When it went out to the server (its deadline counts from here).
    var sentAt: ContinuousClock.Instant?

    init(sql: String, parameters: [String?]) {
        self.sql = sql
        self.parameters = parameters
    }

    /// Resumes the waiting task once (loop thread).
    func finish(_ outcome: Result<PGQueryResult, Error>) {
        continuation?.resume(with: outcome)
        continuation = nil
    }
}
