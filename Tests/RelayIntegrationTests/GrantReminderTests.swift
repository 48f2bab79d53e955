import Foundation
import JSON
@testable import Relay
@testable import RelayCore
import Testing

/// The reminder notification (docs/protocol.md, "Reminders") as the relay decodes it and as the
/// phone gets it.
@Suite struct GrantReminderTests {
    let owner = UUID(), requester = UUID()
    var channel: String { RelayNotification.channel(of: "relay-a") }

    @Test func aReminderNotificationBecomesThePhonesMessage() throws {
        let payload = #"{"kind":"reminder","owner":"\#(owner)","client_id":"c-1","agent_name":"Helper","requester_id":"\#(requester)"}"#
        guard case .reminder(let reminder, let to, let push)? = RelayNotification.decode(channel: channel, payload: payload) else {
            Issue.record("decoded"); return
        }
        #expect(to == owner && reminder == GrantReminder(clientID: "c-1", agentName: "Helper", requesterID: requester))
        #expect(!push, "no pusher named: nobody pushes")
        let message = try #require(JSONValue.parse(reminder.phoneJSON))
        #expect(message["type"]?.string == "reminder" && message["client_id"]?.string == "c-1")
        #expect(message["requester_id"]?.uuid == requester)
        #expect(message["text"]?.string == "Helper can still check your location without asking.")
        let unnamed = GrantReminder(clientID: "c-2", agentName: nil, requesterID: nil)
        #expect(unnamed.text() == "An agent can still check your location without asking.")
        #expect(JSONValue.parse(unnamed.phoneJSON)?["requester_id"]?.isNull == true)
    }

    @Test func onlyTheInstanceNamedAsPusherPushesTheReminder() {
        func push(_ pusher: String, on instance: String) -> Bool? {
            let payload = #"{"kind":"reminder","owner":"\#(owner)","client_id":"c-1","pusher":"\#(pusher)"}"#
            guard case .reminder(_, _, let push)? = RelayNotification.decode(channel: RelayNotification.channel(of: instance),
                                                                             payload: payload) else { return nil }
            return push
        }
        #expect(push("relay-a", on: "relay-a") == true)
        #expect(push("relay-a", on: "relay-b") == false, "an instance holding the owner's sockets only tells its phones")
        #expect(RelayNotification.decode(channel: channel, payload: #"{"kind":"reminder","owner":"\#(owner)","client_id":"c","pusher":7}"#) == nil)
    }

    @Test func theReminderPushCarriesTheSentenceAndTheAgentNeverALocation() throws {
        let reminder = GrantReminder(clientID: "c-1", agentName: "Helper", requesterID: requester)
        let apns = try #require(JSONValue.parse(String(decoding: reminder.apns(), as: UTF8.self)))
        #expect(apns["aps"]?["category"]?.string == "GRANT_REMINDER")
        #expect(apns["aps"]?["alert"]?["body"]?.string == "Helper can still check your location without asking.")
        #expect(apns["kind"]?.string == "reminder" && apns["client_id"]?.string == "c-1" && apns["requester_id"]?.uuid == requester)
        let web = try #require(JSONValue.parse(String(decoding: reminder.webPush(), as: UTF8.self)))
        #expect(web["kind"]?.string == "reminder" && web["body"]?.string == reminder.text() && web["url"]?.string == "/app/")
        #expect(reminder.pushKey.count == 32 && reminder.pushKey != GrantReminder(clientID: "c-1", agentName: "Helper",
                                                                                   requesterID: nil).pushKey,
                "one key per grant: the owner's own and a viewer's are two")
        // The longest name and id still fit APNs' 4,096 bytes and Web Push's 3,993.
        let longest = GrantReminder(clientID: String(repeating: "\u{10FFFF}", count: 255),
                                    agentName: String(repeating: "\u{10FFFF}", count: 200), requesterID: requester)
        #expect(longest.apns().count <= 4096 && longest.webPush().count <= 3993)
    }

    @Test func aReminderThatDoesNotFitIsDropped() {
        for payload in [
            #"{"kind":"reminder","client_id":"c"}"#,  // no owner
            #"{"kind":"reminder","owner":"\#(owner)","client_id":""}"#,
            #"{"kind":"reminder","owner":"\#(owner)","client_id":"c","requester_id":"nobody"}"#,
            #"{"kind":"reminder","owner":"\#(owner)","client_id":"c","agent_name":7}"#,
            #"{"kind":"reminder","owner":"\#(owner)","client_id":"c","agent_name":"\#(String(repeating: "x", count: 201))"}"#,
        ] {
            #expect(RelayNotification.decode(channel: channel, payload: payload) == nil, "\(payload.prefix(60))")
        }
        // Only an instance's own channel carries reminders.
        #expect(RelayNotification.decode(channel: "whereabot_device",
                                         payload: #"{"kind":"reminder","owner":"\#(owner)","client_id":"c"}"#) == nil)
    }
}

/// The reminders a push scheduler claims and sends at once are bounded: one more is dropped
/// and logged. The claim of the first waits on a row lock held here, so it is in flight.
@Suite struct ReminderPushBoundTests {
    @Test func aReminderPastTheBoundIsDroppedAndLogged() async throws {
        let admin = try await TestDatabase.admin()
        let (user, _, _) = try await TestDatabase.makeUser(admin)
        _ = try await admin.query("insert into public.always_allowed_agents (user_id, client_id) values ($1, 'held')", [user])
        _ = try await admin.query("begin")
        _ = try await admin.query("select 1 from public.always_allowed_agents where user_id = $1 for update", [user])
        let logger = Logger(level: .error)
        let database = TestDatabase.relay()
        let metrics = PushMetrics()
        let scheduler = PushSender(instance: "reminder-bound", database: database,
                                      dispatcher: PushDispatcher(services: .none, database: database, metrics: metrics, logger: logger),
                                      timing: PushTiming(), metrics: metrics, logger: logger, maximumReminders: 1)
        let reminder = GrantReminder(clientID: "held", agentName: nil, requesterID: nil)
        await scheduler.remind(reminder, owner: user)  // its claim waits for the lock
        await scheduler.remind(reminder, owner: user)
        #expect(logger.failureCounts["reminder_push_dropped"] == 1, "the second is over the bound of one")
        _ = try await admin.query("rollback")
        await scheduler.finishSending()
        await admin.close()
        #expect(logger.failureCounts["push_claim_failed"] == nil, "the first claim ended once the lock went")
        #expect(metrics.text.contains(#"whereabot_push_claims_total{stage="reminder",status="not_applicable"} 1"#))
    }
}
