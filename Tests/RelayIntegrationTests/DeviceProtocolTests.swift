import Foundation
import HTTPServer
import PGBus
import Relay
import Testing
import TestSupport

/// The device protocol through a running relay: fan-out and cancel, replacement,
/// revocation, and POST /v1/device/answer.
@Suite(.serialized) struct DeviceProtocolTests {
    /// Three phones get the ping; the first answer wins and the other two get cancel.
    @Test func fanOutFirstAnswerWinsOthersGetCancel() async throws {
        let admin = try await TestDatabase.admin()
        defer { Task { await admin.close() } }
        let ada = try await TestDatabase.makeUser(admin)
        let harness = try await RelayHarness.start()
        let phoneToken = RelayHarness.token(user: ada.user, session: ada.session, email: ada.email)
        var phones: [WebSocketClient] = []
        for n in 0..<3 { phones.append(try await harness.phone(phoneToken, name: "Phone \(n)")) }
        let agent = "Bearer " + RelayHarness.token(user: ada.user, session: ada.session, email: ada.email, clientID: "client-x")
        async let located = harness.request("POST", "/v1/locate?timeout_secs=10", authorization: agent)
        var pings: [[String: Any]] = []
        for phone in phones { if let ping = await nextMessage(phone, type: "locate") { pings.append(ping) } }
        #expect(pings.count == 3)
        let id = try #require(pings.first?["id"] as? String)
        #expect(pings.allSatisfy { $0["id"] as? String == id && $0["client_id"] as? String == "client-x" })
        phones[1].send(#"{"type":"denied","id":"\#(id)","reason":"user"}"#)
        let (status, body) = try await located
        #expect(status == 403 && body == "The user declined to share their location.")
        for index in [0, 2] { #expect(await nextMessage(phones[index], type: "cancel")?["id"] as? String == id) }
        #expect(await nextMessage(phones[1], type: "cancel", within: 1) == nil, "the answering phone gets no cancel")
        await harness.stop()
    }

    /// The same device connecting again closes the older socket with 4000 "replaced";
    /// removing the device closes its socket with 4000 "revoked" and revokes its session.
    @Test func replacedAndRevokedDevicesAreClosed() async throws {
        let admin = try await TestDatabase.admin()
        defer { Task { await admin.close() } }
        let ada = try await TestDatabase.makeUser(admin)
        let harness = try await RelayHarness.start()
        let token = RelayHarness.token(user: ada.user, session: ada.session, email: ada.email)
        let device = UUID()
        let old = try await harness.phone(token, device: device)
        let new = try await harness.phone(token, device: device)
        for await _ in old.messages {}
        #expect(old.closeCode == 4000 && old.closeReason == "replaced")
        let claims = try PGJSON(["sub": ada.user.uuidString.lowercased(), "role": "authenticated"])
        _ = try await admin.asUser(claims: claims) { try await $0.query("update public.devices set revoked_at = now() where id = $1", [device]) }
        for await _ in new.messages {}
        #expect(new.closeCode == 4000 && new.closeReason == "revoked")
        // Removing the device also revoked the session that registered it (docs/protocol.md,
        // "The socket"): the same token is refused before the upgrade, for this device id or
        // any other.
        for id in [device, UUID()] {
            await #expect(throws: WebSocketClient.ConnectError.self) { _ = try await harness.phone(token, device: id) }
        }
        await harness.stop()
    }

    /// A request that starts before the phone connects reaches it at hello (resend).
    @Test func aPhoneThatConnectsLateGetsThePendingPing() async throws {
        let admin = try await TestDatabase.admin()
        defer { Task { await admin.close() } }
        let ada = try await TestDatabase.makeUser(admin)
        let harness = try await RelayHarness.start()
        let agent = "Bearer " + RelayHarness.token(user: ada.user, session: ada.session, email: ada.email, clientID: "c")
        async let located = harness.request("POST", "/v1/locate?timeout_secs=10", authorization: agent)
        try await eventually("the request waits") { try await harness.metric("whereabot_pending_requests") == 1 }
        let phone = try await harness.phone(RelayHarness.token(user: ada.user, session: ada.session, email: ada.email))
        let id = try #require(await nextMessage(phone, type: "locate")?["id"] as? String)
        phone.send(#"{"type":"unavailable","id":"\#(id)","reason":"permission"}"#)
        #expect(try await located.status == 424)
        await harness.stop()
    }

    /// An idle phone costs a durable write every 5 minutes, not at every beat: the heartbeat
    /// leaves a younger last_seen_at alone and refreshes an older one once its instance's
    /// 5 minutes are up.
    @Test func heartbeatRefreshesLastSeenEveryFiveMinutes() async throws {
        let admin = try await TestDatabase.admin()
        defer { Task { await admin.close() } }
        let ada = try await TestDatabase.makeUser(admin)
        let harness = try await RelayHarness.start(heartbeat: .milliseconds(300))
        let device = UUID()
        let phone = try await harness.phone(RelayHarness.token(user: ada.user, session: ada.session, email: ada.email), device: device)
        let age = "select extract(epoch from now() - last_seen_at)::int from public.devices where id = $1"
        /// Returns after `count` more heartbeats of the instance.
        func beats(_ count: Int) async throws {
            let beat = "select extract(epoch from heartbeat_at)::float8 from relay.instances where id = $1"
            for _ in 0..<count {
                let last = try await admin.query(beat, [harness.instance]).scalar(Double.self)
                try await eventually("the instance beats", every: .milliseconds(50)) {
                    try await admin.query(beat, [harness.instance]).scalar(Double.self) > last
                }
            }
        }
        try await admin.query("update public.devices set last_seen_at = now() - interval '4 minutes' where id = $1", [device])
        try await beats(2)
        #expect(try await admin.query(age, [device]).scalar(Int.self) >= 240, "beats within 5 minutes write nothing")
        try await admin.query("update public.devices set last_seen_at = now() - interval '6 minutes' where id = $1", [device])
        try await admin.query("update relay.instances set seen_refreshed_at = now() - interval '6 minutes' where id = $1",
                              [harness.instance])
        try await eventually("then the next beat refreshes it", every: .milliseconds(50)) {
            try await admin.query(age, [device]).scalar(Int.self) < 90
        }
        phone.close()
        await harness.stop()
    }

    /// Every status of POST /v1/device/answer.
    @Test func deviceAnswerStatuses() async throws {
        let admin = try await TestDatabase.admin()
        defer { Task { await admin.close() } }
        let ada = try await TestDatabase.makeUser(admin), bob = try await TestDatabase.makeUser(admin)
        let harness = try await RelayHarness.start()
        let adaPhone = "Bearer " + RelayHarness.token(user: ada.user, session: ada.session, email: ada.email)
        let bobPhone = "Bearer " + RelayHarness.token(user: bob.user, session: bob.session, email: bob.email)
        let agent = "Bearer " + RelayHarness.token(user: ada.user, session: ada.session, email: ada.email, clientID: "c")
        let phone = try await harness.phone(String(adaPhone.dropFirst(7)))
        async let located = harness.request("POST", "/v1/locate?timeout_secs=10", authorization: agent)
        let id = try #require(await nextMessage(phone, type: "locate")?["id"] as? String)
        let fix = #"{"type":"location","id":"\#(id)","latitude":48.85,"longitude":2.35,"accuracy_m":20,"timestamp_ms":\#(Int64(Date().timeIntervalSince1970 * 1000))}"#

        #expect(try await harness.request("POST", "/v1/device/answer", authorization: nil, body: fix).status == 401)
        #expect(try await harness.request("POST", "/v1/device/answer", authorization: agent, body: fix).status == 403)
        #expect(try await harness.request("POST", "/v1/device/answer", authorization: bobPhone, body: fix).status == 403)
        #expect(try await harness.request("POST", "/v1/device/answer", authorization: adaPhone, body: "not json").status == 415)
        #expect(try await harness.request("POST", "/v1/device/answer", authorization: adaPhone, body: #"{"type":"mystery"}"#).status == 422)
        #expect(try await harness.request("POST", "/v1/device/answer", authorization: adaPhone,
                                          body: #"{"type":"hello","device_id":"\#(UUID())"}"#).status == 400)
        #expect(try await harness.request("POST", "/v1/device/answer", authorization: adaPhone, body: fix).status == 204)
        #expect(try await harness.request("POST", "/v1/device/answer", authorization: adaPhone, body: fix).status == 410)
        let (status, body) = try await located
        #expect(status == 200 && body.contains("\"latitude\":48.85"))
        await harness.stop()
    }

    /// Expired, tampered and alg:none tokens, and a token signed with another secret, get 401.
    @Test func badTokensGet401() async throws {
        let admin = try await TestDatabase.admin()
        defer { Task { await admin.close() } }
        let ada = try await TestDatabase.makeUser(admin)
        let harness = try await RelayHarness.start()
        var claims = TestToken.claims(user: ada.user, clientID: "c")
        claims["session_id"] = ada.session.uuidString.lowercased()
        claims["exp"] = Int(Date().timeIntervalSince1970) - 3600
        let expired = TestToken.make(header: ["alg": "HS256"], claims: claims) { TestToken.hmac(Array(RelayHarness.secret.utf8), $0) }
        let none = TestToken.make(header: ["alg": "none"], claims: TestToken.claims(user: ada.user, clientID: "c")) { _ in [] }
        let good = RelayHarness.token(user: ada.user, session: ada.session, email: ada.email, clientID: "c")
        let tampered = good.replacingOccurrences(of: ".", with: ".e", options: [], range: good.range(of: "."))
        let other = RelayHarness.token(user: ada.user, session: ada.session, email: ada.email, clientID: "c",
                                       secret: "another-secret-another-secret-another!")
        for token in [expired, none, tampered, other, "garbage"] {
            #expect(try await harness.request("POST", "/v1/locate?timeout_secs=1", authorization: "Bearer " + token).status == 401)
        }
        await harness.stop()
    }

    /// A key revoked while cached on another instance stops working there long before its
    /// cache entry would expire.
    @Test func revokedAgentKeyFailsOnAnotherInstanceBeforeItsCacheExpires() async throws {
        let admin = try await TestDatabase.admin()
        defer { Task { await admin.close() } }
        let ada = try await TestDatabase.makeUser(admin)
        let claims = try PGJSON(["sub": ada.user.uuidString.lowercased(), "role": "authenticated"])
        let key = try await admin.asUser(claims: claims) { try await $0.query("select public.create_agent_key('CI')").scalar(String.self) }
        let a = try await RelayHarness.start(), b = try await RelayHarness.start()
        #expect(try await b.request("POST", "/v1/locate?timeout_secs=1", authorization: "Bearer " + key).status == 503)  // cached on b
        _ = try await admin.asUser(claims: claims) { try await $0.query("select public.revoke_agent_key(id) from public.agent_keys") }
        // The key's cache lasts 60 s: only the revocation's notification can end it sooner.
        var stillCached = 0
        try await eventually("the revocation reaches b", every: .milliseconds(50)) {
            let status = try await b.request("POST", "/v1/locate?timeout_secs=1", authorization: "Bearer " + key).status
            if status == 503 { stillCached += 1 }
            return status == 401
        }
        #expect(try await a.request("GET", "/readyz", authorization: nil).status == 200)
        let metrics = try await b.request("GET", "/metrics", authorization: nil)
        #expect(metrics.status == 200 && metrics.body.contains("whereabot_listener_up 1"))
        #expect(metrics.body.contains(#"whereabot_locate_outcomes_total{outcome="offline"} \#(1 + stillCached)"#))
        // The probe in flight when the revocation arrived may have passed the key check: its
        // call ends abandoned (the agent gets 401), which the histogram counts too (seen on a
        // loaded machine: the probe waited 3 s for the database).
        let abandoned = metrics.body.contains(#"whereabot_locate_outcomes_total{outcome="abandoned"} 1"#) ? 1 : 0
        #expect(abandoned == 1 || !metrics.body.contains(#"outcome="abandoned""#))
        #expect(metrics.body.contains("whereabot_locate_seconds_count \(1 + stillCached + abandoned)"))
        #expect(!metrics.body.contains(ada.email) && !metrics.body.contains(ada.user.uuidString.lowercased()))
        await a.stop()
        await b.stop()
    }
}
