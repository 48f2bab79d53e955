import Foundation
import Loop
import Relay
@testable import RelayCore
import Synchronization
import Testing
import TestSupport

/// The instance's timers run on its loop's clock, and its parts read the time there: on a
/// manual clock a call waits until the test moves time, however long its timeout, and a
/// token expires once the moved clock passes its `exp` — no test waits out a deadline in
/// real time.
@Suite struct RelayClockTests {
    @Test func aCallsDeadlineFallsWhenTheClockIsMoved() async throws {
        let admin = try await TestDatabase.admin()
        defer { Task { await admin.close() } }
        let ada = try await TestDatabase.makeUser(admin)
        // No heartbeat within the test: a moved clock must find the database idle.
        let harness = try await RelayHarness.start(heartbeat: .seconds(3600), clock: .manual)
        let agent = "Bearer " + RelayHarness.token(user: ada.user, session: ada.session, email: ada.email, clientID: "c")
        let answer = Mutex<(status: Int, body: String)?>(nil)
        // 120 s: four times the harness's HTTP timeout, which only a moved clock beats.
        let call = Task {
            let reply = try await harness.request("POST", "/v1/locate?timeout_secs=120", authorization: agent)
            answer.withLock { $0 = reply }
        }
        try await eventually("the call waits") { try await harness.metric("whereabot_pending_requests") == 1 }
        // Past the deadline, then through the grace that its timer arms; time moves only
        // while no statement is in flight (one would have taken that long, and timed out).
        try await eventually("the relay's statements are answered") { await harness.relay.databaseIdle }
        await harness.relay.advance(by: .seconds(120))
        try await eventually("the call ends as its grace passes", every: .milliseconds(20)) {
            if await harness.relay.databaseIdle { await harness.relay.advance(by: .seconds(1)) }
            return answer.withLock { $0 != nil }
        }
        try await call.value
        let reply = try #require(answer.withLock { $0 })
        #expect(reply.status == 503 && reply.body == AgentFailure.notConnected(email: ada.email).agentText, "\(reply)")
        await harness.stop()
    }

    /// The relay reads a credential's expiry on the instance's clock, not the system's: moved
    /// past an agent token's `exp` and the leeway, the relay refuses the token as expired
    /// (401 `invalid_token`) though an hour has not passed.
    @Test func anAgentTokenExpiresWhenTheClockIsMoved() async throws {
        let admin = try await TestDatabase.admin()
        defer { Task { await admin.close() } }
        let ada = try await TestDatabase.makeUser(admin)
        // No heartbeat within the moved hour: a moved clock must find the database idle.
        let harness = try await RelayHarness.start(heartbeat: .seconds(7200), clock: .manual)
        let agent = "Bearer " + RelayHarness.token(user: ada.user, session: ada.session, email: ada.email, clientID: "c")
        let list = #"{"jsonrpc":"2.0","id":1,"method":"tools/list"}"#
        let fresh = try await harness.exchange("POST", "/mcp", authorization: agent, body: list)
        #expect(fresh.status == 200, "\(fresh.status) \(fresh.body)")
        // The token's hour (`TestToken.claims`) and the leeway pass on the instance's clock
        // only. Its `exp` counts from the system's time when it was made, later than the wall
        // time the manual clock started at (by the start's seconds under load): a minute more.
        try await eventually("the relay's statements are answered") { await harness.relay.databaseIdle }
        await harness.relay.advance(by: .seconds(3600 + Int(JWTVerifier.defaultLeeway) + 60))
        let expired = try await harness.exchange("POST", "/mcp", authorization: agent, body: list)
        #expect(expired.status == 401 && expired.body == AgentFailure.badCredential.agentText, "\(expired.status)")
        #expect(expired.headers["www-authenticate"]?.contains(#"error="invalid_token""#) == true, "\(expired.headers)")
        await harness.stop()
    }
}
