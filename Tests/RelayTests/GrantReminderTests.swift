import Foundation
import JSON
@testable import Relay
import Testing

/// The reminder notification (SPEC §14) as the relay decodes it and as the phone gets it.
@Suite struct GrantReminderTests {
    let owner = UUID(), requester = UUID()
    var channel: String { RelayNotification.channel(of: "relay-a") }

    @Test func aReminderNotificationBecomesThePhonesMessage() throws {
        let payload = #"{"kind":"reminder","owner":"\#(owner)","client_id":"c-1","agent_name":"Helper","requester_id":"\#(requester)"}"#
        guard case .reminder(let reminder, let to)? = RelayNotification.decode(channel: channel, payload: payload) else {
            Issue.record("decoded"); return
        }
        #expect(to == owner && reminder == GrantReminder(clientID: "c-1", agentName: "Helper", requesterID: requester))
        let message = try #require(JSONValue.parse(reminder.phoneJSON))
        #expect(message["type"]?.string == "reminder" && message["client_id"]?.string == "c-1")
        #expect(message["requester_id"]?.uuid == requester)
        #expect(message["text"]?.string == "Helper can still check your location without asking.")
        let unnamed = GrantReminder(clientID: "c-2", agentName: nil, requesterID: nil)
        #expect(unnamed.text == "An agent can still check your location without asking.")
        #expect(JSONValue.parse(unnamed.phoneJSON)?["requester_id"]?.isNull == true)
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
