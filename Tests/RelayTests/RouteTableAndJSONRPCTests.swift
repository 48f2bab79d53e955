import Foundation
import JSON
@testable import Relay
import Testing

/// The route table (one place decides 404 and 405 for every route) and the JSON-RPC 2.0
/// decoder of POST /mcp, with docs/openapi.yaml describing both as they are (as
/// Schemathesis, run with every check, sees them).
@Suite struct RouteTableTests {
    /// Every route the relay serves, with the methods `Allow` lists.
    @Test(arguments: [
        ("/v1/locate", "POST"), ("/mcp", "POST"), ("/v1/device/answer", "POST"),
        ("/v1/device", "GET, HEAD"), ("/healthz", "GET, HEAD"), ("/readyz", "GET, HEAD"), ("/metrics", "GET, HEAD"),
        ("/openapi.yaml", "GET, HEAD"), ("/.well-known/oauth-protected-resource", "GET, HEAD"),
        ("/.well-known/oauth-protected-resource/mcp", "GET, HEAD"), ("/app", "GET, HEAD"), ("/app/", "GET, HEAD"),
        ("/app/app.js", "GET, HEAD"), ("/app/missing.js", "GET, HEAD"),
        ("/v1/locate/requests/wbr_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA", "GET, HEAD, DELETE"), ("/v1/locate/requests/junk", "GET, HEAD, DELETE"),
    ])
    func everyRouteKnowsItsMethods(path: String, allow: String) throws {
        let route = try #require(RelayRoutes.Route(path: path))
        for method in allow.components(separatedBy: ", ") { #expect(route.allows(method), "\(method) \(path)") }
        for method in ["TRACE", "PUT", "PATCH", "DELETE", "OPTIONS", "QUERY", "CONNECT", "get", "POST", "GET"]
        where !allow.components(separatedBy: ", ").contains(method) {
            #expect(!route.allows(method), "\(method) \(path)")
            let response = route.methodNotAllowed
            #expect(response.status == 405 && response.headers["Allow"] == allow, "\(method) \(path)")
        }
    }

    /// Paths no route serves stay 404 (no Allow to give).
    @Test(arguments: ["/", "/v1", "/v1/locate/", "/healthz/", "/mcp/x", "/v1/device/answers", "/application", "/.well-known",
                      "/.well-known/oauth-protected-resource/other", "/HEALTHZ", "", "/v1/locate/requests/",
                      "/v1/locate/requests/a/b", "/v1/locate/requests"])
    func unknownPathsHaveNoRoute(path: String) {
        #expect(RelayRoutes.Route(path: path) == nil, "\(path)")
    }

    /// The agents' and phones' routes refuse new work while draining; the rest keep answering.
    @Test func drainingRoutes() {
        #expect(Set(RelayRoutes.Route.allCases.filter(\.drains)) == [.locate, .locateRequest, .mcp, .device])
    }

    /// The browser phone's own guard answers with the same Allow as the route table.
    @Test func appRoutesAnswer405WithAllow() {
        let app = AppRoutes(publicURL: "http://127.0.0.1:8080", supabaseURL: nil, supabaseAnonKey: nil, vapidPublicKey: nil)
        for method in ["POST", "PUT", "TRACE", "DELETE"] {
            let response = app.response(method: method, path: "/app/")
            #expect(response.status == 405 && response.headers["Allow"] == "GET, HEAD", "\(method)")
        }
        #expect(app.response(method: "HEAD", path: "/app/config.json").status == 200)
    }

    /// timeout_secs: whole seconds above 0; anything above 120 waits 120, even past Int.
    @Test func timeoutSeconds() {
        #expect(AgentRoutes.timeoutSeconds("1") == 1 && AgentRoutes.timeoutSeconds("60") == 60)
        #expect(AgentRoutes.timeoutSeconds("121") == 120 && AgentRoutes.timeoutSeconds("9223372036854775807") == 120)
        #expect(AgentRoutes.timeoutSeconds("9999999999999999999") == 120)
        #expect(AgentRoutes.timeoutSeconds(String(repeating: "9", count: 400)) == 120)
        #expect(AgentRoutes.timeoutSeconds("0005") == 5 && AgentRoutes.timeoutSeconds("+7") == 7)
        for junk in ["", "0", "000", "-1", "-99999999999999999999", "1.5", "1e3", " 5", "5 ", "abc", "+", "١٢", "0x10"] {
            #expect(AgentRoutes.timeoutSeconds(junk) == nil, "\(junk)")
        }
    }

    /// docs/openapi.yaml documents each plain-HTTP route with exactly the method the route
    /// table answers (the WebSocket and the browser phone's files are described elsewhere).
    @Test func theDocumentAndTheRouteTableAgree() {
        var documented: [String: [String]] = [:]
        var path: String?
        for line in OpenAPIDocument.yaml.components(separatedBy: "\n") {
            if line.hasPrefix("  \"/"), line.hasSuffix("\":") {
                path = String(line.dropFirst(3).dropLast(2))
            } else if !line.hasPrefix("  ") {
                path = nil
            } else if let current = path, line.hasPrefix("    "), !line.hasPrefix("     "), line.hasSuffix(":") {
                documented[current, default: []].append(line.trimmingCharacters(in: .whitespaces).dropLast().uppercased())
            }
        }
        let served = RelayRoutes.Route.allCases.filter { $0 != .device && $0 != .app }
        func documentedPath(_ route: RelayRoutes.Route) -> String {
            switch route {
            case .locateRequest: route.rawValue + "{request_id}"
            case .oauthConsent: route.rawValue + "{request}"
            case .oauthGrant: route.rawValue + "{grant}"
            default: route.rawValue
            }
        }
        #expect(Set(documented.keys) == Set(served.map(documentedPath)))
        for route in served {
            #expect(documented[documentedPath(route)] == route.methods.filter { $0 != "HEAD" }, "\(route.rawValue)")
        }
    }
}

@Suite struct JSONRPCMessageTests {
    private func decode(_ text: String) -> JSONRPCMessage { JSONRPCMessage.decode(Array(text.utf8)) }

    private func isInvalidRequest(_ text: String) -> Bool {
        if case .invalid(-32600, _) = decode(text) { return true }
        return false
    }

    /// What JSON-RPC 2.0 (§4) calls a request: method a non-empty string, params absent or an
    /// object or array, id a string, a number or null (echoed back as given).
    @Test func requests() throws {
        guard case .request(let id, "tools/list", let params) = decode(#"{"jsonrpc":"2.0","id":7,"method":"tools/list"}"#) else {
            Issue.record("a request"); return
        }
        #expect(id == 7 && params.isEmpty)
        guard case .request(let text, "tools/call", let named) = decode(#"{"jsonrpc":"2.0","id":"a","method":"tools/call","params":{"name":"x"}}"#) else {
            Issue.record("a request with named params"); return
        }
        #expect(text == "a" && named["name"] == "x")
        guard case .request(let null, "ping", let positional) = decode(#"{"jsonrpc":"2.0","id":null,"method":"ping","params":[1,2]}"#) else {
            Issue.record("a request with id null and by-position params"); return
        }
        #expect(null == .null && positional.isEmpty)
        guard case .request(let fraction, _, _) = decode(#"{"jsonrpc":"2.0","id":1.5,"method":"ping","params":{}}"#) else {
            Issue.record("a fractional id"); return
        }
        #expect(fraction == 1.5)
        let longest = String(repeating: "é", count: JSONRPCMessage.maximumMethodLength)
        guard case .request(_, let method, _) = decode(#"{"jsonrpc":"2.0","id":1,"method":"\#(longest)"}"#) else {
            Issue.record("256 characters (512 bytes) of method"); return
        }
        #expect(method == longest)
    }

    /// A message without an id is a notification, answered 202 as before.
    @Test func notifications() {
        guard case .notification("notifications/initialized", _) = decode(#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#) else {
            Issue.record("a notification"); return
        }
        guard case .notification("notifications/cancelled", let params) = decode(#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":1}}"#),
              params["requestId"]?.number == 1 else {
            Issue.record("a notification with params, which a cancel needs"); return
        }
    }

    /// Everything else is -32600 Invalid Request (HTTP 400), never a call of method "".
    @Test(arguments: [
        #"{"jsonrpc":"2.0","id":"28ab1e98","method":"","params":null}"#,  // Schemathesis's find
        #"{"jsonrpc":"2.0","id":"28ab1e98"}"#,  // no method
        #"{"jsonrpc":"2.0","id":1,"method":""}"#,
        #"{"jsonrpc":"2.0","id":1,"method":"ping","params":null}"#,
        #"{"jsonrpc":"2.0","method":"notifications/initialized","params":null}"#,
        #"{"jsonrpc":"2.0","id":1,"method":"ping","params":"x"}"#,
        #"{"jsonrpc":"2.0","id":1,"method":"ping","params":3}"#,
        #"{"jsonrpc":"2.0","id":1,"method":"ping","params":true}"#,
        #"{"jsonrpc":"2.0","id":1,"method":7}"#,
        #"{"jsonrpc":"2.0","id":1,"method":null}"#,
        #"{"jsonrpc":"2.0","id":true,"method":"ping"}"#,
        #"{"jsonrpc":"2.0","id":false,"method":"ping"}"#,
        #"{"jsonrpc":"2.0","id":{},"method":"ping"}"#,
        #"{"jsonrpc":"2.0","id":[1],"method":"ping"}"#,
        #"{"jsonrpc":"1.0","id":1,"method":"ping"}"#,
        #"{"jsonrpc":2.0,"id":1,"method":"ping"}"#,
        #"{"id":1,"method":"ping"}"#,
        #"{"jsonrpc":"2.0","id":1,"result":{}}"#,  // a response: the relay sends clients no requests
        #""ping""#, "1", "null",
    ])
    func invalidRequests(text: String) {
        #expect(isInvalidRequest(text), "\(text)")
    }

    @Test func tooLongMethodsBatchesAndJunk() {
        let long = String(repeating: "é", count: JSONRPCMessage.maximumMethodLength + 1)
        #expect(isInvalidRequest(#"{"jsonrpc":"2.0","id":1,"method":"\#(long)"}"#))
        guard case .invalid(-32600, "Batches are not supported.") = decode(#"[{"jsonrpc":"2.0","id":1,"method":"ping"}]"#) else {
            Issue.record("a batch"); return
        }
        for junk in ["", "{", "{'a':1}", "\u{FF}"] {
            guard case .invalid(-32700, _) = decode(junk) else { Issue.record("parse error for \(junk)"); continue }
        }
    }

    /// docs/openapi.yaml's JSONRPCMessage says what the decoder accepts.
    @Test func theDocumentDescribesTheDecoder() {
        let yaml = OpenAPIDocument.yaml
        let schema = yaml.components(separatedBy: "\n    JSONRPCMessage:\n").last!.components(separatedBy: "\n    JSONRPCError:")[0] + "\n"
        #expect(schema.contains("required:\n        - \"jsonrpc\"\n        - \"method\"\n"))
        #expect(schema.contains("method:\n          type: \"string\"\n          minLength: 1\n          maxLength: 256\n"))
        #expect(schema.contains("params:\n          type:\n            - \"object\"\n            - \"array\"\n"))
        #expect(schema.contains("id:\n          type:\n            - \"string\"\n            - \"number\"\n            - \"null\"\n"))
        #expect(schema.contains("jsonrpc:\n          type: \"string\"\n          const: \"2.0\"\n"))
    }
}
