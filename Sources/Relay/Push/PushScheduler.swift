import Foundation
import RelayCore

/// The push timers of the requests waiting on this instance (the only sender for them,
/// PUSH.md §2): one `PushPlan` per request, fed by the driver (`opened`, `settled`),
/// its timers and its database claims. Nothing here blocks: claims and sends run in tasks.
actor PushScheduler {
    private struct Entry {
        var plan: PushPlan
        var timer: RelayTimers.Handle?
        var claim: PushClaim?
    }

    private let instance: String
    private let database: RelayDatabase
    private let dispatcher: PushDispatcher
    private let timing: PushTiming
    private let budgets: PushBudgets
    private let metrics: PushMetrics
    private let logger: Logger
    private let clock: @Sendable () -> Date
    private let timers: RelayTimers
    private var entries: [UUID: Entry] = [:]
    private var sends: [UUID: (number: Int, task: Task<Void, Never>)] = [:]
    private var sendNumber = 0
    /// Reminders being claimed and sent, by number (at most `maximumReminders`).
    private var reminders: [Int: Task<Void, Never>] = [:]
    private let maximumReminders: Int

    init(instance: String, database: RelayDatabase, dispatcher: PushDispatcher, timing: PushTiming,
         budgets: PushBudgets = PushBudgets(), metrics: PushMetrics, logger: Logger,
         clock: @escaping @Sendable () -> Date = Date.init, timers: RelayTimers = RelayTimers(loop: nil),
         maximumReminders: Int = PushScheduler.maximumReminders) {
        self.maximumReminders = maximumReminders
        self.timers = timers
        self.budgets = budgets
        self.instance = instance
        self.database = database
        self.dispatcher = dispatcher
        self.timing = timing
        self.metrics = metrics
        self.logger = logger
        self.clock = clock
    }

    /// Plans currently kept (one per waiting request at most).
    var count: Int { entries.count }

    /// Request `id` was opened with `connections` sockets of its owner live.
    func opened(_ id: UUID, connections: Int, expires: Date) {
        guard entries[id] == nil else { return }
        entries[id] = Entry(plan: PushPlan(expires: expires, timing: timing))
        handle(id, .opened(connections: connections, now: clock()))
    }

    /// Request `id` was answered or ended: no further stage goes out.
    func settled(_ id: UUID) {
        handle(id, .answered)
    }

    private func handle(_ id: UUID, _ event: PushPlan.Event) {
        guard var entry = entries[id] else { return }
        let actions = entry.plan.handle(event)
        entries[id] = entry
        for action in actions { perform(action, for: id) }
    }

    private func perform(_ action: PushPlan.Action, for id: UUID) {
        switch action {
        case .arm(let stage, let at):
            entries[id]?.timer?.cancel()
            let delay = max(0, at.timeIntervalSince(clock()))
            entries[id]?.timer = timers.after(.milliseconds(Int(delay * 1000))) { [weak self] in
                await self?.fired(id, stage)
            }
        case .claim(let stage):
            let database = self.database, instance = self.instance, logger = self.logger, metrics = self.metrics
            let budgets = self.budgets
            // Owner: the scheduler (weakly: a claim after shutdown does nothing); the claim's
            // result comes back to it as an event.
            Task { [weak self] in
                await Logger.untraced {
                    let result: PushPlan.ClaimResult
                    var claim: PushClaim?
                    do {
                        claim = try await database.claimPush(id: id, instance: instance, stage: stage, budgets: budgets)
                        result = claim!.result
                        metrics.claim(stage: stage.rawValue, status: claim!.status.rawValue)
                    } catch {
                        logger.failure("push_claim_failed", error, ["request": id.uuidString.lowercased(), "stage": stage.rawValue])
                        metrics.claim(stage: stage.rawValue, status: "failed")
                        result = .failed
                    }
                    await self?.claimed(id, stage, result, claim)
                }
            }
        case .send(let kind):
            guard let claim = entries[id]?.claim else { return }
            let plan = entries[id]?.plan
            let stage: PushPlan.Stage = plan?.realertSent == true ? .realert : plan?.checkingSent == true ? .checking : .wake
            let dispatcher = self.dispatcher
            let previous = sends[id]?.task
            sendNumber += 1
            let number = sendNumber
            // Owner: the scheduler, which keeps the task in `sends` until it ends or a newer
            // send of the request replaces it, and waits for them in `finishSending`.
            sends[id] = (number, Task { [weak self] in
                await Logger.untraced {
                    await previous?.value  // the checking alert never overtakes the wake
                    await dispatcher.send(kind, stage: stage, request: id, claim: claim)
                    await self?.sent(id, number)
                }
            })
        case .done:
            entries[id]?.timer?.cancel()
            entries[id] = nil
        }
    }

    private func fired(_ id: UUID, _ stage: PushPlan.Stage) {
        handle(id, .timerFired(stage, now: clock()))
    }

    private func claimed(_ id: UUID, _ stage: PushPlan.Stage, _ result: PushPlan.ClaimResult, _ claim: PushClaim?) {
        entries[id]?.claim = claim
        handle(id, .claimResult(stage, result, now: clock()))
    }

    private func sent(_ id: UUID, _ number: Int) {
        if sends[id]?.number == number { sends[id] = nil }
    }

    /// Reminders claimed and sent at once at most; one more is dropped and logged (each
    /// comes from one settled answer, so many at once means a flood, not people).
    static let maximumReminders = 256

    /// Pushes the reminder of `owner`'s standing grant this instance was named to push
    /// (SPEC §14): claims it once (`relay.claim_reminder_push`) and sends it to the targets
    /// the budgets pay for.
    func remind(_ reminder: GrantReminder, owner: UUID) {
        guard reminders.count < maximumReminders else {
            logger.warning("reminder_push_dropped", ["reason": "too_many"])
            return
        }
        let database = self.database, dispatcher = self.dispatcher, budgets = self.budgets
        let metrics = self.metrics, logger = self.logger
        sendNumber += 1
        let number = sendNumber
        // Owner: the scheduler, which keeps the task in `reminders` until it ends and waits
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

    /// Waits for pushes already being sent (drain).
    func finishSending() async {
        for send in sends.values { await send.task.value }
        for reminder in reminders.values { await reminder.value }
    }
}
