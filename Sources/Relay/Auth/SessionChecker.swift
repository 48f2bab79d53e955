import Foundation
import RelayCore

/// Session checks (`relay.session_states`) of many requests and sockets in one call: the
/// first check goes at once, and those that arrive while a call is running go together
/// when it returns — no added latency when the relay is idle, one statement per batch in a
/// reconnect storm. The batching is `CallCoalescer`'s (the one every set-based call of the
/// relay goes through); a failed call is logged once, whatever the number of checks in it.
final class SessionChecker: Sendable {
    /// Calls in flight at once.
    static let maximumInFlight = 2

    private struct Check: Sendable {
        let session: UUID
        let user: UUID
    }

    private let calls: CallCoalescer<Check, RelayStatus.Session>

    /// Creates a checker over `database`; a call that fails is logged to `logger` (its
    /// callers get nil: "cannot check now").
    init(database: RelayDatabase, logger: Logger? = nil) {
        @Sendable func states(_ checks: [Check]) async throws -> [RelayStatus.Session] {
            do {
                return try await database.sessionStates(checks.map { ($0.session, $0.user) })
            } catch {
                logger?.failure("session_check_failed", error, ["sessions": String(checks.count)])
                throw error
            }
        }
        calls = CallCoalescer(maximumInFlight: Self.maximumInFlight, maximumBatch: RelayDatabase.maxSessionChecks,
                              tasks: database.batches, single: { check in try await states([check])[0] },
                              batch: { checks in try await states(checks).map { .success($0) } })
    }

    /// The session's state; nil when the database could not be asked (logged).
    func state(session: UUID, user: UUID) async -> RelayStatus.Session? {
        try? await calls.call(Check(session: session, user: user))
    }
}
