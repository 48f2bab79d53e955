import Foundation

/// The waiting side of a locate: opens the request in Postgres, waits for the sealed
/// answer (delivered by the bus through `deliver`), and turns everything into an outcome.
///
/// Deadline: the phone's `expires_ms` plus `grace`, so that a phone's own `no_answer`
/// arrives as 408 rather than 504. A cancelled task (the agent hung up) abandons the
/// request, which cancels the pings. No answer by the deadline: 504 when a device got the
/// ping, else 503.
public actor LocateCoordinator {
    /// Time after `expires_ms` the waiter still waits for the phone's own answer.
    public static let defaultGrace: Duration = .seconds(2)
    /// Requests that may wait for one user's phones at once (the 429 cap).
    public static let defaultMaxWaiting = 5

    /// One locate as the agent asked it.
    public struct Request: Sendable {
        /// Whose phones to ask.
        public var owner: UUID
        /// Who asks, when it is someone else (location sharing).
        public var requester: UUID?
        /// The asking agent's client id.
        public var clientID: String
        /// The agent's name, for pushes.
        public var clientName: String?
        /// The credential's email, for the 503 text.
        public var email: String?
        /// How long the phone has to answer.
        public var timeout: Duration

        /// Creates a request.
        public init(owner: UUID, requester: UUID? = nil, clientID: String, clientName: String? = nil,
                    email: String? = nil, timeout: Duration) {
            self.owner = owner
            self.requester = requester
            self.clientID = clientID
            self.clientName = clientName
            self.email = email
            self.timeout = timeout
        }
    }

    private let instance: String
    private let database: RelayDatabase
    private let grace: Duration
    private let maxWaiting: Int
    private var waiters: [UUID: Waiter] = [:]

    private enum Waiter {
        case waiting(CheckedContinuation<AnswerNotification?, Never>?)
        case answered(AnswerNotification)
    }

    /// Creates the coordinator of relay instance `instance`.
    public init(instance: String, database: RelayDatabase, grace: Duration = LocateCoordinator.defaultGrace,
                maxWaiting: Int = LocateCoordinator.defaultMaxWaiting) {
        self.instance = instance
        self.database = database
        self.grace = grace
        self.maxWaiting = maxWaiting
    }

    /// Requests waiting here now (for /metrics and resync).
    public var waitingCount: Int { waiters.count }

    /// A `whereabot_answer` notification for this instance arrived.
    public func deliver(_ answer: AnswerNotification) {
        guard answer.waiter == instance, let waiter = waiters[answer.id] else { return }
        if case .waiting(let continuation) = waiter {
            waiters[answer.id] = .answered(answer)
            continuation?.resume(returning: answer)
        }
    }

    /// Asks the owner's phones and waits for the first answer.
    /// - Throws: database errors (the caller answers 503).
    public func locate(_ request: Request) async throws -> LocateOutcome {
        let id = UUID()
        let replyKey = try ReplyKey()
        let expiresAt = Date().addingTimeInterval(TimeInterval(request.timeout.components.seconds))
        waiters[id] = .waiting(nil)
        defer { waiters[id] = nil }
        let opened = try await database.openRequest(
            id: id, owner: request.owner, requester: request.requester, clientID: request.clientID,
            clientName: request.clientName, instance: instance, replyKey: replyKey.publicKey,
            expiresAt: expiresAt, maxWaiting: maxWaiting)
        if opened.status == "too_many" { return .failure(.tooManyWaiting) }

        let answer = await waitForAnswer(id, until: .now + request.timeout + grace)
        if Task.isCancelled {
            _ = try? await Task { try await database.finish(id: id, instance: instance, abandoned: true) }.value
            return .abandoned
        }
        if let answer { return outcome(of: answer, replyKey: replyKey, request: request) }

        let finished = try await database.finish(id: id, instance: instance, abandoned: false)
        if finished.status == "already_settled" {
            // An answer won at the last moment; its notification is on its way.
            if let late = await waitForAnswer(id, until: .now + .seconds(1)) {
                return outcome(of: late, replyKey: replyKey, request: request)
            }
            return outcome(of: AnswerNotification(id: id, waiter: instance, outcome: finished.outcome ?? "unavailable",
                                                  reason: finished.reason ?? "error", sealed: nil),
                           replyKey: replyKey, request: request)
        }
        return finished.delivered == true ? .failure(.phoneSilent) : .failure(.notConnected(email: request.email))
    }

    /// Suspends until the answer for `id` arrives, `deadline` passes, or the task is cancelled.
    private func waitForAnswer(_ id: UUID, until deadline: ContinuousClock.Instant) async -> AnswerNotification? {
        if case .answered(let answer)? = waiters[id] { return answer }
        let timer = Task { [weak self] in
            try? await Task.sleep(until: deadline)
            await self?.expire(id)
        }
        defer { timer.cancel() }
        return await withTaskCancellationHandler {
            await withCheckedContinuation { continuation in
                if case .answered(let answer)? = waiters[id] {
                    continuation.resume(returning: answer)
                } else if Task.isCancelled {
                    continuation.resume(returning: nil)
                } else {
                    waiters[id] = .waiting(continuation)
                }
            }
        } onCancel: {
            Task { await self.expire(id) }
        }
    }

    /// Wakes the waiter of `id` without an answer (deadline or cancellation).
    private func expire(_ id: UUID) {
        guard case .waiting(let continuation)? = waiters[id] else { return }
        waiters[id] = .waiting(nil)
        continuation?.resume(returning: nil)
    }

    private func outcome(of answer: AnswerNotification, replyKey: ReplyKey, request: Request) -> LocateOutcome {
        switch (answer.outcome, answer.reason) {
        case ("location", _):
            guard let sealed = answer.sealed,
                  let plaintext = try? replyKey.open(sealed, requestID: answer.id),
                  let fix = try? JSONDecoder().decode(LocationFix.self, from: Data(plaintext)),
                  fix.isPlausible else { return .failure(.noFix) }
            return .fix(fix)
        case ("denied", "no_answer"): return .failure(.noAnswer)
        case ("denied", _): return .failure(.declined)
        case ("unavailable", "permission"): return .failure(.permissionOff)
        default: return .failure(.noFix)
        }
    }
}
