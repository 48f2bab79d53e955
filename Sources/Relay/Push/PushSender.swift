import Foundation
import RelayCore

/// The pushes' I/O for this instance: it claims a stage of a request's pushes
/// (`relay.claim_push`, exactly once across instances) and sends what was claimed, as the
/// instance's value plans them (`Instance.pushes`, one `PushPlan` per request:
/// docs/protocol.md, "Who sends: the claim"), and it claims and sends the reminders of
/// standing grants. It decides nothing about a request's pushes; nothing here blocks.
actor PushSender {
    private let instance: String
    private let database: RelayDatabase
    private let dispatcher: PushDispatcher
    /// The pushes' delays (the value's plans use them).
    nonisolated let timing: PushTiming
    private let budgets: PushBudgets
    private let metrics: PushMetrics
    private let logger: Logger
    private var sendNumber = 0
    /// Reminders being claimed and sent, by number (at most `maximumReminders`).
    private var reminders: [Int: Task<Void, Never>] = [:]
    private let maximumReminders: Int
    /// Set by `finishSending()`: no reminder starts from now on.
    private var sendingFinished = false

    init(instance: String, database: RelayDatabase, dispatcher: PushDispatcher, timing: PushTiming,
         budgets: PushBudgets = PushBudgets(), metrics: PushMetrics, logger: Logger,
         maximumReminders: Int = PushSender.maximumReminders) {
        self.maximumReminders = maximumReminders
        self.budgets = budgets
        self.instance = instance
        self.database = database
        self.dispatcher = dispatcher
        self.timing = timing
        self.metrics = metrics
        self.logger = logger
    }

    /// Claims `stage` of request `id`'s pushes; what the plan learns, and the claim (its
    /// targets) when there is one. A failed call is logged and counted, and is `failed`.
    nonisolated func claim(_ id: UUID, stage: PushPlan.Stage) async -> (PushPlan.ClaimResult, PushClaim?) {
        do {
            let claim = try await database.claimPush(id: id, instance: instance, stage: stage, budgets: budgets)
            metrics.claim(stage: stage.rawValue, status: claim.status.rawValue)
            return (claim.result, claim)
        } catch {
            logger.failure("push_claim_failed", error, ["request": id.uuidString.lowercased(), "stage": stage.rawValue])
            metrics.claim(stage: stage.rawValue, status: "failed")
            return (.failed, nil)
        }
    }

    /// Sends the claimed push of `kind` for `stage` of request `id` to the claim's targets.
    nonisolated func send(_ kind: PushPlan.Kind, stage: PushPlan.Stage, request id: UUID, claim: PushClaim) async {
        await dispatcher.send(kind, stage: stage, request: id, claim: claim)
    }

    /// Reminders claimed and sent at once at most; one more is dropped and logged (each
    /// comes from one settled answer, so many at once means a flood, not people).
    static let maximumReminders = 256

    /// Pushes the reminder of `owner`'s standing grant this instance was named to push
    /// (docs/protocol.md, "Reminders"): claims it once (`relay.claim_reminder_push`) and
    /// sends it to the targets the budgets pay for.
    func remind(_ reminder: GrantReminder, owner: UUID) {
        guard !sendingFinished else {
            logger.warning("reminder_push_dropped", ["reason": "shutting_down"])
            return
        }
        guard reminders.count < maximumReminders else {
            logger.warning("reminder_push_dropped", ["reason": "too_many"])
            return
        }
        let database = self.database, dispatcher = self.dispatcher, budgets = self.budgets
        let metrics = self.metrics, logger = self.logger
        sendNumber += 1
        let number = sendNumber
        // Owner: the sender, which keeps the task in `reminders` until it ends and waits
        // for it in `finishSending`.
        reminders[number] = Task { [weak self] in
            await Logger.untraced {
                do {
                    let claim = try await database.claimReminderPush(reminder, owner: owner, budgets: budgets)
                    metrics.claim(stage: "reminder", status: claim.status.rawValue)
                    if claim.status == .claimed { await dispatcher.remind(reminder, claim: claim) }
                } catch {
                    logger.failure("push_claim_failed", error, ["stage": "reminder"])
                    metrics.claim(stage: "reminder", status: "failed")
                }
                await self?.reminded(number)
            }
        }
    }

    private func reminded(_ number: Int) {
        reminders[number] = nil
    }

    /// The step before the push transport stops: no reminder starts from now on, and this
    /// returns when those being sent have ended (the driver waits for its requests' pushes
    /// itself: `InstanceDriver.finishPushes()`).
    func finishSending() async {
        sendingFinished = true
        while let reminder = reminders.values.first { await reminder.value }
    }
}
