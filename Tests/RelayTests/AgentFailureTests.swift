import Foundation
import Relay
@testable import RelayCore
import Testing

/// The status table of docs/protocol.md, "Answers and agent texts", row by row.
@Suite struct AgentFailureTests {
    /// Each failure maps to its status and its exact agent text.
    @Test(arguments: [
        (AgentFailure.badCredential, 401, "Missing, unknown, expired or revoked credential."),
        (.declined, 403, "The user declined to share their location."),
        (.noAnswer, 408, "The user did not respond on their phone. Ask them before trying again."),
        (.permissionOff, 424,
         "Location access is off for Whereabot on the user's phone. Ask them to allow it in Settings."),
        (.noFix, 424, "The phone could not get a location fix. Try again in a moment."),
        (.tooManyWaiting, 429,
         "Too many location requests are already waiting for this user. Wait for one to finish, then retry."),
        (.notConnected(email: "ada@example.com"), 503,
         "The user's phone is not connected. Ask the user to open the Whereabot app, signed in as ada@example.com and keep it open, then retry."),
        (.notConnected(email: nil), 503,
         "The user's phone is not connected. Ask the user to open the Whereabot app and keep it open, then retry."),
        (.phoneSilent, 504, "The phone did not answer in time. Ask the user to open Whereabot and retry."),
    ])
    func statusAndText(failure: AgentFailure, status: Int, text: String) {
        #expect(failure.status == status)
        #expect(failure.agentText == text)
    }
}

/// The sharing texts of docs/protocol.md, "Locating someone else".
@Suite struct SharingTextTests {
    @Test func sharingFailures() {
        #expect(AgentFailure.nobodyNamed("Ada").status == 404)
        #expect(AgentFailure.nobodyNamed("Ada").agentText
                == "Nobody named Ada shares their location with you. Ask them to share it with you in Whereabot.")
        let people = [Person(userID: nil, name: "Al", email: "al@one.example"), Person(userID: nil, name: "al", email: "al@two.example")]
        #expect(AgentFailure.ambiguousPerson("al", people).status == 409)
        #expect(AgentFailure.ambiguousPerson("al", people).agentText.contains("Al (al@one.example), al (al@two.example)"))
        #expect(AgentFailure.personDeclined("Ada Lovelace").status == 403)
        #expect(AgentFailure.personDeclined("Ada Lovelace").agentText == "Ada Lovelace declined to share their location.")
    }
}

/// The quiet-hours text of docs/protocol.md, "Quiet hours", and the Retry-After it carries over
/// HTTP and MCP alike.
@Suite struct QuietHoursTextTests {
    @Test func aRequestInQuietHoursSaysUntilWhenOnTheOwnersClock() {
        let now = Date(timeIntervalSince1970: 1_000_000)
        let failure = AgentFailure.quietHours(name: "Ada", until: now.addingTimeInterval(599.2), local: "07:00")
        #expect(failure.status == 503)
        #expect(failure.agentText == "Ada is in quiet hours until 07:00 (their time). Ask again then.")
        #expect(failure.retryAfter(now: now) == 600, "whole seconds, rounded up")
        #expect(failure.retryAfter(now: now.addingTimeInterval(700)) == 1, "never 0 or negative")
        #expect(AgentFailure.notConnected(email: nil).retryAfter(now: now) == nil)
        let error = RelayError.locate(failure, now: now)
        #expect(error.status == 503 && error.text == failure.agentText && error.retryAfter != nil)
    }
}
