import Foundation

/// Session checks (`relay.session_states`) of many requests and sockets in one call: the
/// first check goes at once, and those that arrive while a call is running go together
/// when it returns — no added latency when the relay is idle, one statement per batch in a
/// reconnect storm.
actor SessionChecker {
    /// Calls in flight at once.
    static let maximumInFlight = 2

    private struct Check: Sendable {
        let session: UUID
        let user: UUID
        let done: CheckedContinuation<RelayStatus.Session?, Never>
    }

    private let database: RelayDatabase
    private let logger: Logger?
    private var batcher = CallBatcher<Check>(window: .zero, maximumBatch: RelayDatabase.maxSessionChecks,
                                             maximumInFlight: SessionChecker.maximumInFlight)

    /// Creates a checker over `database`; a call that fails is logged to `logger` (its
    /// callers get nil: "cannot check now").
    init(database: RelayDatabase, logger: Logger? = nil) {
        self.database = database
        self.logger = logger
    }

    /// The session's state; nil when the database could not be asked.
    func state(session: UUID, user: UUID) async -> RelayStatus.Session? {
        await withCheckedContinuation { done in
            perform(batcher.add(Check(session: session, user: user, done: done)))
        }
    }

    private func perform(_ actions: [CallBatcher<Check>.Action]) {
        for action in actions {
            switch action {
            case .armTimer:  // a zero window arms no timer
                break
            case .send(let checks):
                let logger = self.logger
                Task {
                    await Logger.untraced {
                        let states: [RelayStatus.Session]?
                        do {
                            states = try await database.sessionStates(checks.map { ($0.session, $0.user) })
                        } catch {
                            logger?.failure("session_check_failed", error, ["sessions": String(checks.count)])
                            states = nil
                        }
                        for (index, check) in checks.enumerated() { check.done.resume(returning: states?[index]) }
                        self.sent()
                    }
                }
            }
        }
    }

    private func sent() { perform(batcher.sent()) }
}
