#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Foundation
import HTTPServer
import PGBus
import Relay
@testable import RelayCore
import Testing
import TestSupport

/// A real relay instance on a real port: a phone over WebSocket, an agent over HTTP.
@Suite struct RelayEndToEndTests {
    static let secret = "super-secret-jwt-token-with-at-least-32-characters"

    func token(user: UUID, session: UUID, email: String, clientID: String? = nil) -> String {
        var claims = TestToken.claims(user: user, clientID: clientID)
        claims["session_id"] = session.uuidString.lowercased()
        claims["email"] = email
        return TestToken.make(header: ["alg": "HS256", "typ": "JWT"], claims: claims) { TestToken.hmac(Array(Self.secret.utf8), $0) }
    }

    func post(_ url: String, authorization: String) async throws -> (Int, String, [AnyHashable: Any]) {
        var request = URLRequest(url: URL(string: url)!)
        request.httpMethod = "POST"
        request.setValue(authorization, forHTTPHeaderField: "Authorization")
        request.timeoutInterval = 30
        let (data, response) = try await URLSession.shared.data(for: request)
        let http = response as! HTTPURLResponse
        return (http.statusCode, String(decoding: data, as: UTF8.self), http.allHeaderFields)
    }

    @Test func anAgentLocatesAConnectedPhone() async throws {
        let admin = try await TestDatabase.admin()
        defer { Task { await admin.close() } }
        let ada = try await TestDatabase.makeUser(admin), bob = try await TestDatabase.makeUser(admin)
        let relay = try RelayService(.init(database: PGConfiguration(TestDatabase.relayURL, applicationName: "e2e"),
                                           port: 0, publicURL: "http://relay.test", instanceID: "e2e-\(UUID().uuidString.prefix(6).lowercased())",
                                           jwtSecret: Self.secret))
        let port = try await relay.start()
        let base = "http://127.0.0.1:\(port)"

        // The phone: connects, says hello, answers every ping with a fix.
        let phone = try await WebSocketClient.connect("ws://127.0.0.1:\(port)/v1/device",
                                                      headers: [("Authorization", "Bearer " + token(user: ada.user, session: ada.session, email: ada.email))])
        phone.send(#"{"type":"hello","app_version":"1.0","device_id":"\#(UUID())","device_name":"Ada's Pixel","platform":"android"}"#)
        let answering = Task {
            for await message in phone.messages {
                guard case .text(let text) = message,
                      let object = try? JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any],
                      object["type"] as? String == "locate", let id = object["id"] as? String else { continue }
                let now = Int64(Date().timeIntervalSince1970 * 1000)
                phone.send(#"{"type":"location","id":"\#(id)","latitude":52.52,"longitude":13.405,"accuracy_m":12,"timestamp_ms":\#(now)}"#)
            }
        }
        try await eventually("the phone's hello is registered", every: .milliseconds(20)) {
            try await admin.query("select count(*)::int from relay.connections where user_id = $1", [ada.user]).scalar(Int.self) == 1
        }

        let agentToken = "Bearer " + token(user: ada.user, session: ada.session, email: ada.email, clientID: "6f1d0c1e-5b1a-4c1e-9a55-0a9f3c1e7b21")
        let (status, body, _) = try await post(base + "/v1/locate?timeout_secs=5", authorization: agentToken)
        #expect(status == 200)
        let fix = try #require(try JSONSerialization.jsonObject(with: Data(body.utf8)) as? [String: Any])
        #expect(fix["latitude"] as? Double == 52.52 && fix["longitude"] as? Double == 13.405)
        #expect((fix["device"] as? [String: String]) == ["name": "Ada's Pixel", "platform": "android"])

        // A phone's token may not ask; an agent's token may not connect as a phone.
        let (phoneAsks, text, headers) = try await post(base + "/v1/locate", authorization: "Bearer " + token(user: ada.user, session: ada.session, email: ada.email))
        #expect(phoneAsks == 401 && text == "Missing, unknown, expired or revoked credential.")
        #expect((headers["Www-Authenticate"] ?? headers["WWW-Authenticate"]) as? String
                == #"Bearer resource_metadata="http://relay.test/.well-known/oauth-protected-resource", scope="location", error="invalid_token""#,
                "a presented token that is not an agent's is an invalid token (RFC 6750 §3.1)")
        await #expect(throws: WebSocketClient.ConnectError.rejected(status: 403, body: "Agent credentials cannot connect as a phone.")) {
            _ = try await WebSocketClient.connect("ws://127.0.0.1:\(port)/v1/device", headers: [("Authorization", agentToken)])
        }

        // Bob has no phone: 503 naming his account.
        let (offline, offlineText, _) = try await post(base + "/v1/locate?timeout_secs=1",
                                                       authorization: "Bearer " + token(user: bob.user, session: bob.session, email: bob.email, clientID: "c"))
        #expect(offline == 503)
        #expect(offlineText == AgentFailure.notConnected(email: bob.email).agentText)

        let (bad, _, _) = try await post(base + "/v1/locate?timeout_secs=0", authorization: agentToken)
        #expect(bad == 400)

        await relay.shutdown(drainTimeout: .seconds(2))
        await relay.run()
        for await _ in phone.messages {}
        #expect(phone.closeCode == 1012 && phone.closeReason == "restart")
        answering.cancel()
    }
}
