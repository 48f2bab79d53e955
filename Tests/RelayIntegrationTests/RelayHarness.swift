#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Foundation
import HTTPServer
import Loop
import PGBus
import Relay
import Testing
import TestSupport

/// A running relay instance for tests, with helpers for phones and agents.
struct RelayHarness: Sendable {
    static let secret = "super-secret-jwt-token-with-at-least-32-characters"
    let relay: RelayService
    let port: Int
    var base: String { "http://127.0.0.1:\(port)" }

    let instance: String

    /// Starts an instance and returns once its first full resync is done.
    static func start(heartbeat: Duration = .seconds(10), reapEvery: Int = 6, clock: LoopClock = .continuous) async throws -> RelayHarness {
        let instance = "harness-\(UUID().uuidString.prefix(6).lowercased())"
        var configuration = RelayService.Configuration(
            database: PGConfiguration(TestDatabase.relayURL, applicationName: instance), port: 0, publicURL: "http://relay.test",
            instanceID: instance, jwtSecret: secret)
        configuration.heartbeatInterval = heartbeat
        configuration.reapEvery = reapEvery
        configuration.clock = clock
        configuration.logger = Logger(level: .warning)  // info lines (push disabled, …) are noise in test output
        let relay = try RelayService(configuration)
        let harness = RelayHarness(relay: relay, port: try await relay.start(), instance: instance)
        // The LISTEN's first activation re-says every hello; phones connect after it, so
        // that no test sees a re-registration it did not cause.
        try await eventually("the instance's first full resync", every: .milliseconds(10)) {
            try await harness.metric("whereabot_resyncs_total") >= 1
        }
        return harness
    }

    /// Stops the instance gracefully; every test that stops one checks that no database
    /// call started after the pool had shut down (every user of the pool stops before it:
    /// docs/architecture.md, "One instance").
    func stop() async {
        await relay.shutdown(drainTimeout: .seconds(1))
        await relay.run()
        #expect(await relay.databaseCallsAfterShutdown == 0, "a database call after the pool shut down")
    }

    static func token(user: UUID, session: UUID, email: String, clientID: String? = nil, secret: String = RelayHarness.secret) -> String {
        var claims = TestToken.claims(user: user, clientID: clientID)
        claims["session_id"] = session.uuidString.lowercased()
        claims["email"] = email
        return TestToken.make(header: ["alg": "HS256", "typ": "JWT"], claims: claims) { TestToken.hmac(Array(secret.utf8), $0) }
    }

    /// A connected phone that has said hello, returned once the database holds its socket
    /// for this instance (`awaitingHello: false`: at once, for a hello the test holds up).
    func phone(_ token: String, device: UUID = UUID(), name: String = "Phone", awaitingHello: Bool = true) async throws -> WebSocketClient {
        let admin = try await TestDatabase.admin()
        defer { Task { await admin.close() } }
        let sent = try await admin.query("select extract(epoch from clock_timestamp())::float8").scalar(Double.self)
        let client = try await WebSocketClient.connect("ws://127.0.0.1:\(port)/v1/device", headers: [("Authorization", "Bearer " + token)])
        client.send(#"{"type":"hello","app_version":"1","device_id":"\#(device)","device_name":"\#(name)","platform":"ios"}"#)
        if awaitingHello {
            try await eventually("the phone's hello is registered", every: .milliseconds(10)) {
                try await admin.query("""
                    select exists (select from relay.connections
                                   where device_id = $1 and instance_id = $2 and extract(epoch from opened_at) >= $3)
                    """, [device, instance, sent]).scalar(Bool.self)
            }
        }
        return client
    }

    /// A value from this instance's /metrics: an unlabelled series, 0 when absent.
    func metric(_ name: String) async throws -> Double {
        let lines = try await request("GET", "/metrics", authorization: nil).body.split(separator: "\n")
        return lines.first { $0.hasPrefix(name + " ") }.flatMap { Double($0.dropFirst(name.count + 1)) } ?? 0
    }

    func request(_ method: String, _ path: String, authorization: String?, body: String? = nil,
                 contentType: String = "application/json") async throws -> (status: Int, body: String) {
        let response = try await exchange(method, path, authorization: authorization, body: body, contentType: contentType)
        return (response.status, response.body)
    }

    /// One HTTP exchange with the response's headers too.
    func exchange(_ method: String, _ path: String, authorization: String?, body: String? = nil,
                  contentType: String = "application/json") async throws -> (status: Int, body: String, headers: [String: String]) {
        var request = URLRequest(url: URL(string: base + path)!)
        request.httpMethod = method
        request.timeoutInterval = 30
        if let authorization { request.setValue(authorization, forHTTPHeaderField: "Authorization") }
        if let body {
            request.httpBody = Data(body.utf8)
            request.setValue(contentType, forHTTPHeaderField: "Content-Type")
        }
        let (data, response) = try await URLSession.shared.data(for: request)
        let http = response as! HTTPURLResponse
        let headers = Dictionary(http.allHeaderFields.map { (String(describing: $0.key).lowercased(), String(describing: $0.value)) },
                                 uniquingKeysWith: { first, _ in first })
        return (http.statusCode, String(decoding: data, as: UTF8.self), headers)
    }
}

/// Reads JSON messages from a phone until one of `type` arrives (or `seconds` pass).
func nextMessage(_ client: WebSocketClient, type: String, within seconds: Double = 5) async -> [String: Any]? {
    @Sendable func parse(_ text: String) -> [String: Any]? {
        try? JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any]
    }
    let text = await withTimeout(.seconds(seconds)) { () -> String? in
        for await message in client.messages {
            if case .text(let text) = message, parse(text)?["type"] as? String == type { return text }
        }
        return nil
    }
    return text.flatMap(parse)
}
