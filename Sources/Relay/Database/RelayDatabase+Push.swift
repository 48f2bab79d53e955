import Foundation
import PGBus
import RelayCore

extension RelayDatabase {
    /// Claims push stage `stage` (wake or checking) of request `id` for its waiter
    /// `instance`: once per stage across instances (docs/protocol.md, "Who sends: the claim"), with
    /// the targets `budgets`
    /// still pay for.
    func claimPush(id: UUID, instance: String, stage: PushPlan.Stage, budgets: PushBudgets) async throws -> PushClaim {
        let json = try await pool.send("select relay.claim_push($1, $2, $3, $4, $5)",
                            [id, instance, stage.rawValue, budgets.perTargetPerHour, budgets.perAccountPerHour])
            .scalar(PGJSON.self).parsed()
        guard let claim = PushClaim(json: json) else { throw Self.malformed("claim_push") }
        return claim
    }

    /// Claims the push of a reminder this instance was named to send (docs/protocol.md, "Reminders"): once per
    /// reminder, with the owner's targets the budgets pay for.
    func claimReminderPush(_ reminder: GrantReminder, owner: UUID, budgets: PushBudgets) async throws -> PushClaim {
        let json = try await pool.send("select relay.claim_reminder_push($1, $2, $3, $4, $5)",
                                       [owner, reminder.clientID, reminder.requesterID, budgets.perTargetPerHour,
                                        budgets.perAccountPerHour])
            .scalar(PGJSON.self).parsed()
        guard let claim = PushClaim(json: json) else { throw Self.malformed("claim_reminder_push") }
        return claim
    }

    /// Deletes an APNs token APNs called dead; with `unregisteredAt` (a 410's timestamp)
    /// only if the token was stored no later. False when nothing was deleted.
    @discardableResult
    public func dropAPNsToken(_ token: String, unregisteredAt: Date?) async throws -> Bool {
        try await pool.send("select relay.drop_apns_token($1, $2)", [token, unregisteredAt]).scalar(Bool.self)
    }

    /// Deletes a Web Push subscription whose service answered 404 or 410.
    @discardableResult
    public func dropWebPushSubscription(_ endpoint: String) async throws -> Bool {
        try await pool.send("select relay.drop_web_push_subscription($1)", [endpoint]).scalar(Bool.self)
    }
}
