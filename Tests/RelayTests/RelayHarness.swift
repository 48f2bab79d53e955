#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Foundation
import HTTPServer
import PGBus
import Relay

/// A running relay instance for tests, with helpers for phones and agents.
struct RelayHarness: Sendable {
    static let secret = "super-secret-jwt-token-with-at-least-32-characters"
    let relay: RelayService
    let port: Int
    var base: String { "http://127.0.0.1:\(port)" }

    let instance: String

    static func start(heartbeat: Duration = .seconds(10), reapEvery: Int = 6) async throws -> RelayHarness {
        let instance = "harness-\(UUID().uuidString.prefix(6).lowercased())"
        var configuration = RelayService.Configuration(
            database: PGConfiguration(TestDatabase.relayURL, applicationName: instance), port: 0, publicURL: "http://relay.test",
            instanceID: instance, jwtSecret: secret)
        configuration.heartbeatInterval = heartbeat
        configuration.reapEvery = reapEvery
        configuration.logger = Logger(level: .warning)  // info lines (push disabled, …) are noise in test output
        let relay = try RelayService(configuration)
        return RelayHarness(relay: relay, port: try await relay.start(), instance: instance)
    }

    func stop() async {
        await relay.shutdown(drainTimeout: .seconds(1))
        await relay.run()
    }

    static func token(user: UUID, session: UUID, email: String, clientID: String? = nil, secret: String = RelayHarness.secret) -> String {
        var claims = TestToken.claims(user: user, clientID: clientID)
        claims["session_id"] = session.uuidString.lowercased()
        claims["email"] = email
        return TestToken.make(header: ["alg": "HS256", "typ": "JWT"], claims: claims) { TestToken.hmac(Array(secret.utf8), $0) }
    }

    /// A connected phone that has said hello.
    func phone(_ token: String, device: UUID = UUID(), name: String = "Phone") async throws -> WebSocketClient {
        let client = try await WebSocketClient.connect("ws://127.0.0.1:\(port)/v1/device", headers: [("Authorization", "Bearer " + token)])
        client.send(#"{"type":"hello","app_version":"1","device_id":"\#(device)","device_name":"\#(name)","platform":"ios"}"#)
        try await Task.sleep(for: .milliseconds(300))
        return client
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
    func parse(_ text: String) -> [String: Any]? {
        try? JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any]
    }
    let text = await withTaskGroup(of: String?.self) { group in
        group.addTask {
            for await message in client.messages {
                if case .text(let text) = message, parse(text)?["type"] as? String == type { return text }
            }
            return nil
        }
        group.addTask {
            try? await Task.sleep(for: .seconds(seconds))
            return nil
        }
        let first = await group.next() ?? nil
        group.cancelAll()
        return first
    }
    return text.flatMap(parse)
}
