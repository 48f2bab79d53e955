import Foundation
import HTTPServer
import PGBus
import Relay
import Testing
import TestSupport

/// Notifications are hints: lost ones, rows lost in a crash and a draining instance must
/// not lose a request.
@Suite(.serialized) struct ResyncAndDrainTests {
    static func fix(_ id: String) -> String {
        #"{"type":"location","id":"\#(id)","latitude":48.85,"longitude":2.35,"accuracy_m":20,"timestamp_ms":\#(Int64(Date().timeIntervalSince1970 * 1000))}"#
    }

    /// The waiter's LISTEN connection is killed and the phone (on another instance) answers
    /// before it is back: the sealed answer is replayed by the instance that sealed it, so
    /// the agent still gets the fix (without the replay: 424 after the deadline).
    @Test func aSealedAnswerMissedWhileListenWasDownIsReplayed() async throws {
        let admin = try await TestDatabase.admin()
        defer { Task { await admin.close() } }
        let ada = try await TestDatabase.makeUser(admin)
        let waiter = try await RelayHarness.start(), holder = try await RelayHarness.start()
        let phone = try await holder.phone(RelayHarness.token(user: ada.user, session: ada.session, email: ada.email))
        let agent = "Bearer " + RelayHarness.token(user: ada.user, session: ada.session, email: ada.email, clientID: "c")
        async let located = waiter.request("POST", "/v1/locate?timeout_secs=8", authorization: agent)
        let id = try #require(await nextMessage(phone, type: "locate")?["id"] as? String)
        let killed = try await admin.query("select count(pg_terminate_backend(pid)) from pg_stat_activity where application_name = $1",
                                           [waiter.instance + "-listen"]).scalar(Int.self)
        #expect(killed == 1)
        phone.send(Self.fix(id))  // settled while the waiter cannot hear it (reconnect waits ≥ 0.5 s)
        let (status, body) = try await located
        #expect(status == 200 && body.contains("\"latitude\":48.85"), "got \(status) \(body)")
        let metrics = try await waiter.request("GET", "/metrics", authorization: nil).body
        #expect(metrics.contains("whereabot_listener_reconnects_total 1"))
        await waiter.stop()
        await holder.stop()
    }

    /// The holder's LISTEN connection is killed and a request opens before it is back: the
    /// locate notification is lost, and the resync after the reconnect sends the ping.
    @Test func aPingMissedWhileListenWasDownIsSentAtResync() async throws {
        let admin = try await TestDatabase.admin()
        defer { Task { await admin.close() } }
        let ada = try await TestDatabase.makeUser(admin)
        let waiter = try await RelayHarness.start(), holder = try await RelayHarness.start()
        let phone = try await holder.phone(RelayHarness.token(user: ada.user, session: ada.session, email: ada.email))
        let killed = try await admin.query("select count(pg_terminate_backend(pid)) from pg_stat_activity where application_name = $1",
                                           [holder.instance + "-listen"]).scalar(Int.self)
        #expect(killed == 1)
        let agent = "Bearer " + RelayHarness.token(user: ada.user, session: ada.session, email: ada.email, clientID: "c")
        async let located = waiter.request("POST", "/v1/locate?timeout_secs=8", authorization: agent)
        let id = try #require(await nextMessage(phone, type: "locate", within: 6)?["id"] as? String)
        phone.send(Self.fix(id))
        let (status, body) = try await located
        #expect(status == 200 && body.contains("\"latitude\":48.85"), "got \(status) \(body)")
        await waiter.stop()
        await holder.stop()
    }

    /// A request whose locate notification never came (its row written without one): the
    /// backstop poll at the next heartbeat sends the ping anyway.
    @Test func theBackstopPollSendsAPingWhoseNotificationWasLost() async throws {
        let admin = try await TestDatabase.admin()
        defer { Task { await admin.close() } }
        let ada = try await TestDatabase.makeUser(admin)
        let relay = try await RelayHarness.start(heartbeat: .milliseconds(200))
        let phone = try await relay.phone(RelayHarness.token(user: ada.user, session: ada.session, email: ada.email))
        let request = UUID()
        try await admin.query("""
            insert into relay.pending_requests (id, owner_id, client_id, waiter_instance, reply_key, expires_at)
            values ($1, $2, 'c', 'elsewhere', decode(repeat('ab', 32), 'hex'), now() + interval '60 seconds')
            """, [request, ada.user])
        #expect(await nextMessage(phone, type: "locate")?["id"] as? String == request.uuidString.lowercased())
        await relay.stop()
    }

    /// A dead instance (no heartbeat for 30 s) is reaped by a live one: its waiting request
    /// is abandoned, and the phone that got the ping is told to cancel it.
    @Test func aDeadInstancesRequestsAreAbandonedAndCancelled() async throws {
        let admin = try await TestDatabase.admin()
        defer { Task { await admin.close() } }
        let ada = try await TestDatabase.makeUser(admin)
        let relay = try await RelayHarness.start(heartbeat: .milliseconds(200), reapEvery: 1)
        let phone = try await relay.phone(RelayHarness.token(user: ada.user, session: ada.session, email: ada.email))
        let dead = "dead-\(UUID().uuidString.prefix(6).lowercased())", request = UUID()
        // The instance dies only once its request has been pinged: any live relay (those of
        // tests running beside this one too) may reap it, and one that reaped it before the
        // ping left nothing to ping (the CI run of 2026-12-03 failed so).
        try await admin.query("insert into relay.instances (id, heartbeat_at) values ($1, now())", [dead])
        try await admin.query("set role whereabot_relay")
        _ = try await admin.query("select relay.open_request($1, $2, null, 'c', null, $3, decode(repeat('ab', 32), 'hex'), now() + interval '60 seconds')",
                                  [request, ada.user, dead])
        try await admin.query("reset role")
        #expect(await nextMessage(phone, type: "locate")?["id"] as? String == request.uuidString.lowercased())
        try await admin.query("update relay.instances set heartbeat_at = now() - interval '1 minute' where id = $1", [dead])
        #expect(await nextMessage(phone, type: "cancel")?["id"] as? String == request.uuidString.lowercased())
        let outcome = try await admin.query("select outcome from relay.pending_requests where id = $1", [request]).scalar(String?.self)
        #expect(outcome == "abandoned")
        #expect(try await admin.query("select count(*) from relay.instances where id = $1", [dead]).scalar(Int.self) == 0)
        await relay.stop()
    }

    /// A crash empties the UNLOGGED tables (here: this instance's rows only, so that other
    /// tests are untouched). The next heartbeat finds the instance row gone, re-creates the
    /// waiting request and re-registers the phone, and the phone's later answer settles it.
    @Test func rowsLostInACrashAreRecreated() async throws {
        let admin = try await TestDatabase.admin()
        defer { Task { await admin.close() } }
        let ada = try await TestDatabase.makeUser(admin)
        let relay = try await RelayHarness.start(heartbeat: .milliseconds(300))
        let phone = try await relay.phone(RelayHarness.token(user: ada.user, session: ada.session, email: ada.email))
        let agent = "Bearer " + RelayHarness.token(user: ada.user, session: ada.session, email: ada.email, clientID: "c")
        async let located = relay.request("POST", "/v1/locate?timeout_secs=8", authorization: agent)
        let id = try #require(await nextMessage(phone, type: "locate")?["id"] as? String)
        try await admin.withTransaction { db in
            try await db.query("delete from relay.pending_requests where waiter_instance = $1", [relay.instance])
            try await db.query("delete from relay.connections where instance_id = $1", [relay.instance])
            try await db.query("delete from relay.instances where id = $1", [relay.instance])
        }
        try await eventually("the request row and the phone's connection are back", every: .milliseconds(50)) {
            try await admin.query("""
                select exists (select from relay.pending_requests where id = $1 and settled_at is null)
                   and exists (select from relay.connections where instance_id = $2)
                """, [UUID(uuidString: id)!, relay.instance]).scalar(Bool.self)
        }
        phone.send(Self.fix(id))
        let (status, body) = try await located
        #expect(status == 200 && body.contains("\"longitude\":2.35"), "got \(status) \(body)")
        #expect(await nextMessage(phone, type: "locate", within: 0.5) == nil, "the phone is not pinged twice")
        await relay.stop()
    }

    /// SIGTERM-style drain: /readyz and new agent requests get 503 with Retry-After, the
    /// phone's socket closes 1012 "restart", and the request already waiting is answered
    /// once the phone has reconnected to another instance. Then the drained instance stops.
    @Test func drainKeepsWaitingRequestsAndRefusesNewOnes() async throws {
        let admin = try await TestDatabase.admin()
        defer { Task { await admin.close() } }
        let ada = try await TestDatabase.makeUser(admin)
        let draining = try await RelayHarness.start(), other = try await RelayHarness.start()
        let phoneToken = RelayHarness.token(user: ada.user, session: ada.session, email: ada.email)
        let device = UUID()
        let phone = try await draining.phone(phoneToken, device: device)
        let agent = "Bearer " + RelayHarness.token(user: ada.user, session: ada.session, email: ada.email, clientID: "c")
        async let located = draining.request("POST", "/v1/locate?timeout_secs=10", authorization: agent)
        _ = try #require(await nextMessage(phone, type: "locate"))

        let stopped = Task { await draining.relay.shutdown(drainTimeout: .seconds(15)); await draining.relay.run() }
        for await _ in phone.messages {}
        #expect(phone.closeCode == 1012 && phone.closeReason == "restart")
        #expect(try await draining.request("GET", "/readyz", authorization: nil).status == 503)
        let refused = try await draining.exchange("POST", "/v1/locate?timeout_secs=5", authorization: agent)
        #expect(refused.status == 503 && refused.headers["retry-after"] != nil && refused.body.contains("restarting"))
        #expect(try await draining.request("GET", "/v1/device", authorization: "Bearer " + phoneToken).status == 503)

        let moved = try await other.phone(phoneToken, device: device)
        let id = try #require(await nextMessage(moved, type: "locate")?["id"] as? String)
        moved.send(Self.fix(id))
        let (status, body) = try await located
        #expect(status == 200 && body.contains("\"latitude\":48.85"), "got \(status) \(body)")
        await stopped.value
        #expect(await draining.relay.databaseCallsAfterShutdown == 0, "the drain stopped every user of the pool first")
        await other.stop()
    }

    /// A socket closed and a ping sent just before the stop leave their batched calls
    /// (disconnects after 50 ms, delivered marks after 200 ms) in windows that may end while
    /// the pool shuts down: the driver lets the calls running end first and starts none after
    /// (`InstanceDriver.finish()`; else a disconnect can be refused by the shut pool). `stop()`
    /// checks it; the window's end meeting the pool's shutdown is a race this test makes
    /// possible three times, not certain.
    @Test func batchedCallsPendingAtTheStopEndBeforeThePool() async throws {
        let admin = try await TestDatabase.admin()
        defer { Task { await admin.close() } }
        for _ in 0..<3 {
            let relay = try await RelayHarness.start()
            let ada = try await TestDatabase.makeUser(admin)
            let phoneToken = RelayHarness.token(user: ada.user, session: ada.session, email: ada.email)
            let leaving = try await relay.phone(phoneToken), staying = try await relay.phone(phoneToken)
            let agent = "Bearer " + RelayHarness.token(user: ada.user, session: ada.session, email: ada.email, clientID: "c")
            let located = Task { try await relay.request("POST", "/v1/locate?timeout_secs=10", authorization: agent) }
            let id = try #require(await nextMessage(staying, type: "locate")?["id"] as? String)
            staying.send(#"{"type":"denied","id":"\#(id)","reason":"user"}"#)
            #expect(try await located.value.status == 403)  // nothing waits: the drain is quick
            leaving.close()
            await relay.stop()
            staying.close()
        }
    }
}
