import Foundation
import PGBus
import Relay
import Testing
import TestSupport

/// The races that would leave a connected phone without its ping, each made
/// deterministic with a real relay and Postgres (race 3, a stale hello, is SQL only:
/// supabase/tests/33-relay-batched-hellos.test.sql).
@Suite(.serialized) struct PhoneRacesTests {
    /// Race 1: a ping that arrives while the phone's hello waits in the database (here: the
    /// test holds the owner's lock, as a concurrent `open_request` would) is sent when the
    /// hello returns, although the hello's pending list does not hold it.
    @Test func aPingArrivingDuringTheHelloReachesThePhone() async throws {
        let admin = try await TestDatabase.admin()
        defer { Task { await admin.close() } }
        let ada = try await TestDatabase.makeUser(admin)
        let relay = try await RelayHarness.start()  // heartbeat 10 s: no backstop poll within the test
        let lock = "select pg_advisory_lock(hashtextextended('whereabot_open_request:' || $1::text, 0))"
        _ = try await admin.query(lock, [ada.user])
        let phone = try await relay.phone(RelayHarness.token(user: ada.user, session: ada.session, email: ada.email), awaitingHello: false)
        let holder = try await admin.query("select pg_backend_pid()").scalar(Int.self)
        try await eventually("the hello waits for the lock") {
            try await admin.query("select count(*)::int from pg_stat_activity where $1 = any(pg_blocking_pids(pid))", [holder])
                .scalar(Int.self) > 0
        }
        let registered = "select count(*)::int from relay.connections where user_id = $1"
        #expect(try await admin.query(registered, [ada.user]).scalar(Int.self) == 0, "the hello waits for the lock")
        // The request's notification reaches the holder now; its row is gone again, so the
        // hello's pending list cannot hold it.
        let request = UUID()
        let received = try await relay.metric("whereabot_notifications_received_total")
        _ = try await admin.query("""
            with r as (insert into relay.pending_requests (id, owner_id, client_id, waiter_instance, reply_key, expires_at)
                       values ($1, $2, 'c', 'elsewhere', decode(repeat('ab', 32), 'hex'), now() + interval '60 seconds')
                       returning *)
            select private.notify_instances(array[$3], private.locate_ping(r) || '{"kind":"locate"}') from r
            """, [request, ada.user, relay.instance])
        _ = try await admin.query("delete from relay.pending_requests where id = $1", [request])
        try await eventually("the notification reached the instance before the hello returns") {
            try await relay.metric("whereabot_notifications_received_total") > received
        }
        _ = try await admin.query("select pg_advisory_unlock(hashtextextended('whereabot_open_request:' || $1::text, 0))", [ada.user])
        #expect(await nextMessage(phone, type: "locate", within: 3)?["id"] as? String == request.uuidString.lowercased())
        #expect(try await admin.query(registered, [ada.user]).scalar(Int.self) == 1)
        await relay.stop()
    }

    /// Race 3: a message sent while the hello is in the database is handled by the hello's
    /// task once it returns, and one sent after by the socket's own; the second waits for the
    /// first (docs/protocol.md, "The socket": in order). Here the first (a key's creation)
    /// waits for the per-account insert lock the test holds, and the second (the key list)
    /// comes meanwhile: the phone gets the creation's answer first, and a list that holds the
    /// key (not the list first, empty, as the browser phone once showed).
    @Test func messagesAcrossTheHelloAreAnsweredInOrder() async throws {
        let admin = try await TestDatabase.admin()
        defer { Task { await admin.close() } }
        let ada = try await TestDatabase.makeUser(admin)
        let relay = try await RelayHarness.start()
        let helloLock = "hashtextextended('whereabot_open_request:' || $1::text, 0)"
        let insertLock = "'public.agent_keys'::regclass::int, hashtext($1::text)"
        _ = try await admin.query("select pg_advisory_lock(\(helloLock))", [ada.user])
        _ = try await admin.query("select pg_advisory_lock(\(insertLock))", [ada.user])
        let phone = try await relay.phone(RelayHarness.token(user: ada.user, session: ada.session, email: ada.email), awaitingHello: false)
        let holder = try await admin.query("select pg_backend_pid()").scalar(Int.self)
        let blocked = "select count(*)::int from pg_stat_activity where $1 = any(pg_blocking_pids(pid))"
        try await eventually("the hello waits for the lock") { try await admin.query(blocked, [holder]).scalar(Int.self) > 0 }
        phone.send(#"{"type":"agent_key_create","name":"first"}"#)
        try await Task.sleep(for: .milliseconds(200))  // real time: the message must reach the relay while the hello waits
        _ = try await admin.query("select pg_advisory_unlock(\(helloLock))", [ada.user])
        let registered = "select count(*)::int from relay.connections where user_id = $1"
        try await eventually("registered, and the creation waits for the insert lock") {
            let sockets = try await admin.query(registered, [ada.user]).scalar(Int.self)
            let waiting = try await admin.query(blocked, [holder]).scalar(Int.self)
            return sockets == 1 && waiting > 0
        }
        phone.send(#"{"type":"agent_keys"}"#)
        try await Task.sleep(for: .milliseconds(300))  // real time: the list must reach the relay while the creation waits
        _ = try await admin.query("select pg_advisory_unlock(\(insertLock))", [ada.user])
        let first = try #require(await nextMessage(phone, type: "agent_keys", within: 10))
        let second = try #require(await nextMessage(phone, type: "agent_keys", within: 10))
        #expect(first["created"] is String, "the creation is answered first")
        #expect((second["keys"] as? [Any])?.count == 1, "then the list, which holds the key")
        await relay.stop()
    }

    /// Race 2: the instance's row vanished (reaped while it was stalled, or lost in a
    /// crash). The next hello does not re-create it: it is refused as unregistered, the
    /// instance beats at once (re-creating the row) and says hello again for every socket —
    /// the old phone's too, which a silently re-created row would have left unregistered.
    @Test func aReapedInstanceReregistersEverySocket() async throws {
        let admin = try await TestDatabase.admin()
        defer { Task { await admin.close() } }
        let ada = try await TestDatabase.makeUser(admin), bob = try await TestDatabase.makeUser(admin)
        let relay = try await RelayHarness.start()  // heartbeat 10 s: only the refused hello can trigger the beat
        let old = try await relay.phone(RelayHarness.token(user: ada.user, session: ada.session, email: ada.email))
        let sockets = "select count(*)::int from relay.connections where instance_id = $1"
        #expect(try await admin.query(sockets, [relay.instance]).scalar(Int.self) == 1)
        _ = try await admin.query("delete from relay.instances where id = $1", [relay.instance])  // its sockets go with it
        _ = try await relay.phone(RelayHarness.token(user: bob.user, session: bob.session, email: bob.email))
        try await eventually("both sockets registered again", every: .milliseconds(50)) {
            try await admin.query(sockets, [relay.instance]).scalar(Int.self) == 2
        }
        #expect(try await admin.query("select count(*)::int from relay.instances where id = $1", [relay.instance])
            .scalar(Int.self) == 1)
        // And the old phone is reachable again.
        let agent = "Bearer " + RelayHarness.token(user: ada.user, session: ada.session, email: ada.email, clientID: "c")
        async let located = relay.request("POST", "/v1/locate?timeout_secs=5", authorization: agent)
        let id = try #require(await nextMessage(old, type: "locate")?["id"] as? String)
        old.send(ResyncAndDrainTests.fix(id))
        #expect(try await located.status == 200)
        await relay.stop()
    }
}
