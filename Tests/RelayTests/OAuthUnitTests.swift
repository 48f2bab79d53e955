import Crypto
import Fetch
import Foundation
import HTTPServer
import JSON
@testable import Relay
import Testing

/// The authorization server's decoders and rules, without a database: redirect URIs,
/// PKCE, client metadata, client documents, form bodies, the addresses a document may be
/// fetched from, and the relay's own access tokens.
@Suite struct OAuthUnitTests {
    @Test(arguments: [
        ("https://agent.example/cb", true), ("http://127.0.0.1/cb", true), ("http://127.0.0.1:8080/cb", true),
        ("http://[::1]:9/cb", true), ("http://localhost:1/cb", true), ("com.example.app:/oauth", true),
        ("http://example.com/cb", false), ("https://user@agent.example/cb", false), ("https://agent.example/cb#x", false),
        ("javascript:alert(1)", false), ("data:text/html,x", false), ("noscheme", false), ("https:///cb", false),
        ("myapp:/cb", false), ("https://agent.example:99999/cb", false), ("https://agent.example/c b", false),
        ("http://127.0.0.1.evil.example/cb", false), ("https://agent.example\\@evil.example/", false),
    ])
    func redirectURIsThatMayBeRegistered(uri: String, allowed: Bool) {
        #expect(RedirectURI.isRegistrable(uri) == allowed, "\(uri)")
    }

    @Test func loopbackRedirectsMatchOnAnyPortAndNothingElseLoosens() {
        #expect(RedirectURI.matches(registered: "http://127.0.0.1/cb", requested: "http://127.0.0.1:5555/cb"))
        #expect(RedirectURI.matches(registered: "http://127.0.0.1:1/cb", requested: "http://127.0.0.1:2/cb"))
        #expect(RedirectURI.matches(registered: "http://[::1]/cb", requested: "http://[::1]:7/cb"))
        #expect(!RedirectURI.matches(registered: "http://127.0.0.1/cb", requested: "http://127.0.0.1:5555/other"))
        #expect(!RedirectURI.matches(registered: "http://127.0.0.1/cb", requested: "http://localhost:5555/cb"))
        #expect(!RedirectURI.matches(registered: "https://agent.example/cb", requested: "https://agent.example:444/cb"))
        #expect(!RedirectURI.matches(registered: "https://agent.example/cb", requested: "https://agent.example/cb?x=1"))
        #expect(RedirectURI.matches(registered: "https://agent.example/cb", requested: "https://agent.example/cb"))
        #expect(RedirectURI.displayHost("http://127.0.0.1:9/cb") == "127.0.0.1:9")
        #expect(RedirectURI.displayHost("com.example.app:/oauth") == "com.example.app")
    }

    @Test func pkceIsS256Only() {
        // RFC 7636 Appendix B.
        #expect(PKCE.challenge(ofVerifier: "dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk") == "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM")
        #expect(PKCE.challenge(ofVerifier: String(repeating: "a", count: 42)) == nil)
        #expect(PKCE.challenge(ofVerifier: String(repeating: "a", count: 129)) == nil)
        #expect(PKCE.challenge(ofVerifier: String(repeating: "a", count: 42) + "!") == nil)
        #expect(PKCE.isChallenge("E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM"))
        #expect(!PKCE.isChallenge("E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-c="))
        #expect(!PKCE.isChallenge("short"))
    }

    @Test func formsRefuseRepeatedNamesAndDecode() throws {
        let form = try #require(FormFields("grant_type=authorization_code&code=a%2Bb+c&redirect_uri=http%3A%2F%2Fx&flag"))
        #expect(form["grant_type"] == "authorization_code" && form["code"] == "a+b c" && form["redirect_uri"] == "http://x")
        #expect(form["flag"] == "" && form["missing"] == nil)
        #expect(FormFields("code=a&code=b") == nil)
        #expect(FormFields("c%6Fde=a&code=b") == nil)  // the same name, escaped
        #expect(FormFields(Substring((0...32).map { "f\($0)=1" }.joined(separator: "&"))) == nil)
        #expect(FormFields("")?.values.isEmpty == true)
    }

    @Test func registrationMetadataIsCheckedAndTheNameCleaned() throws {
        let good: JSONValue = ["redirect_uris": ["https://agent.example/cb"], "client_name": "  Ada\u{202E}'s\nagent  ",
                               "grant_types": ["refresh_token", "authorization_code"], "token_endpoint_auth_method": "none"]
        let client = try OAuthClient.fromMetadata(good, id: "wbc_x", kind: .registered, allowedMethods: [.none],
                                                  defaultMethod: .secretBasic, secretDigest: { _ in nil }).get()
        #expect(client.name == "Ada's agent" && client.grantTypes == ["authorization_code", "refresh_token"])
        #expect(client.authMethod == .none && client.wantsRefreshTokens)
        let long: JSONValue = ["redirect_uris": ["https://a.example/cb"], "client_name": .string(String(repeating: "n", count: 100))]
        #expect(try OAuthClient.fromMetadata(long, id: "x", kind: .registered, allowedMethods: [.none], defaultMethod: .none,
                                             secretDigest: { _ in nil }).get().name.count == OAuthClient.maximumNameLength)
        let refusals: [(JSONValue, String)] = [
            (["redirect_uris": []], "invalid_redirect_uri"),
            (["redirect_uris": .array(Array(repeating: "https://a.example/cb", count: 11))], "invalid_redirect_uri"),
            (["redirect_uris": [1]], "invalid_redirect_uri"),
            (["redirect_uris": ["https://a.example/cb"], "grant_types": ["implicit"]], "invalid_client_metadata"),
            (["redirect_uris": ["https://a.example/cb"], "grant_types": ["refresh_token"]], "invalid_client_metadata"),
            (["redirect_uris": ["https://a.example/cb"], "response_types": ["token"]], "invalid_client_metadata"),
            (["redirect_uris": ["https://a.example/cb"], "token_endpoint_auth_method": "client_secret_basic"], "invalid_client_metadata"),
            (["redirect_uris": ["https://a.example/cb"], "client_name": 5], "invalid_client_metadata"),
            ([1, 2], "invalid_client_metadata"),
        ]
        for (metadata, code) in refusals {
            let result = OAuthClient.fromMetadata(metadata, id: "x", kind: .registered, allowedMethods: [.none],
                                                  defaultMethod: .none, secretDigest: { _ in nil })
            guard case .failure(let refusal) = result else {
                Issue.record("accepted \(metadata)")
                continue
            }
            #expect(refusal.code == code, "\(metadata)")
        }
    }

    @Test(arguments: [
        ("https://agent.example/client.json", true), ("https://agent.example/a/b?x=1", true),
        ("https://agent.example/", false), ("https://agent.example", false), ("http://agent.example/client.json", false),
        ("https://agent.example/a/../b", false), ("https://agent.example/./b", false), ("https://u@agent.example/c", false),
        ("https://agent.example/c#f", false), ("https://agent.example/" + String(repeating: "a", count: 240), false),
        ("wbc_00000000000000000000000000000000", false),
    ])
    func documentURLs(url: String, isDocument: Bool) {
        #expect(ClientDocuments.isDocumentURL(url) == isDocument, "\(url)")
    }

    @Test func documentsMustNameThemselvesAndHoldNoSecret() throws {
        let url = "https://agent.example/client.json"
        func check(_ object: [String: Any]) -> Result<OAuthClient, DocumentFetch.Failure> {
            ClientDocuments.client(document: try! JSONSerialization.data(withJSONObject: object), url: url)
        }
        let client = try check(["client_id": url, "client_name": "Agent", "redirect_uris": ["http://127.0.0.1/cb"]]).get()
        #expect(client.kind == .document && client.authMethod == .none && client.name == "Agent")
        #expect(throws: DocumentFetch.Failure.self) { try check(["client_id": url + "x", "redirect_uris": ["http://127.0.0.1/cb"]]).get() }
        #expect(throws: DocumentFetch.Failure.self) {
            try check(["client_id": url, "redirect_uris": ["http://127.0.0.1/cb"], "client_secret": "s"]).get()
        }
        #expect(throws: DocumentFetch.Failure.self) {
            try check(["client_id": url, "redirect_uris": ["http://127.0.0.1/cb"], "token_endpoint_auth_method": "private_key_jwt"]).get()
        }
        #expect(throws: DocumentFetch.Failure.self) { try ClientDocuments.client(document: Data("[]".utf8), url: url).get() }
    }

    @Test func documentsAreFetchedOnlyFromPublicAddresses() {
        let refused: [[UInt8]] = [[127, 0, 0, 1], [10, 1, 2, 3], [172, 16, 0, 1], [172, 31, 255, 255], [192, 168, 1, 1],
                                  [169, 254, 169, 254], [100, 64, 0, 1], [0, 0, 0, 0], [224, 0, 0, 1], [255, 255, 255, 255],
                                  [0xFC] + Array(repeating: 0, count: 15), [0xFE, 0x80] + Array(repeating: 0, count: 14),
                                  Array(repeating: 0, count: 15) + [1], Array(repeating: 0, count: 16),
                                  Array(repeating: 0, count: 10) + [0xFF, 0xFF, 10, 0, 0, 1],
                                  [0, 0x64, 0xFF, 0x9B] + Array(repeating: 0, count: 8) + [192, 168, 0, 1]]
        for address in refused { #expect(!FetchAddress.mayFetch(address, allowLoopback: false), "\(address)") }
        for address: [UInt8] in [[93, 184, 216, 34], [172, 32, 0, 1], [8, 8, 8, 8], [0x26, 0x06, 0x28, 0] + Array(repeating: 0, count: 12)] {
            #expect(FetchAddress.mayFetch(address, allowLoopback: false), "\(address)")
        }
        #expect(FetchAddress.mayFetch([127, 0, 0, 1], allowLoopback: true))
        #expect(FetchAddress.mayFetch(Array(repeating: 0, count: 15) + [1], allowLoopback: true))
        #expect(!FetchAddress.mayFetch([10, 0, 0, 1], allowLoopback: true))  // loopback only, never private
        #expect(FetchAddress.resolve("localhost", allowLoopback: false) == nil)
        #expect(FetchAddress.resolve("127.0.0.1", allowLoopback: true) == "127.0.0.1")
    }

    @Test func cacheControlGivesTheDocumentsLife() {
        #expect(HTTPGet.maxAge("Cache-Control: public, max-age=3600\r\n") == 3600)
        #expect(HTTPGet.maxAge("cache-control: no-store\r\n") == 0)
        #expect(HTTPGet.maxAge("Cache-Control: private\r\n") == nil)
        #expect(HTTPGet.maxAge("Cache-Control: max-age=-5\r\n") == nil)
    }

    @Test func accessTokensAreBoundToTheRelayAndItsResource() throws {
        let secret = Array(repeating: UInt8(7), count: 32)
        let tokens = AccessTokens(secret: secret, issuer: "https://relay.example")
        let family = try #require(OAuthFamily(["user_id": .string(UUID().uuidString), "family_id": .string(UUID().uuidString),
                                               "client_id": "wbc_1", "scope": "location", "resource": "https://relay.example/mcp",
                                               "email": "ada@example.com"]))
        let now = Date()
        let token = try tokens.sign(family, resource: family.resource, lifetime: 3600, now: now)
        let claims = try tokens.verifier.verify(token, now: now)
        #expect(claims.userID == family.userID && claims.sessionID == family.familyID && claims.clientID == "wbc_1")
        #expect(claims.email == "ada@example.com" && JWTVerifier.issuer(of: token) == "https://relay.example")
        // Another resource, another relay, another key, an expired one: refused.
        let elsewhere = try tokens.sign(family, resource: "https://elsewhere.example/mcp", lifetime: 3600, now: now)
        #expect(throws: AuthError.wrongAudience) { try tokens.verifier.verify(elsewhere, now: now) }
        let otherRelay = AccessTokens(secret: secret, issuer: "https://other.example")
        #expect(throws: AuthError.self) { try otherRelay.verifier.verify(token, now: now) }
        let otherKey = AccessTokens(secret: Array(repeating: 8, count: 32), issuer: "https://relay.example")
        #expect(throws: AuthError.badSignature) { try otherKey.verifier.verify(token, now: now) }
        #expect(throws: AuthError.expired) { try tokens.verifier.verify(token, now: now.addingTimeInterval(3700)) }
        // A Supabase verifier with the same bytes as its secret does not take it (no role, no `authenticated`).
        let supabase = try JWTVerifier(hmacSecret: String(decoding: Digest.hmacSHA256(key: secret, Array("whereabot oauth access token v1".utf8)), as: UTF8.self))
        #expect(throws: AuthError.self) { try supabase.verify(token, now: now) }
        // The consent token is bound to the request and the person.
        let request = UUID(), user = UUID()
        #expect(tokens.consentToken(request: request, user: user) == tokens.consentToken(request: request, user: user))
        #expect(tokens.consentToken(request: request, user: user) != tokens.consentToken(request: UUID(), user: user))
        #expect(tokens.consentToken(request: request, user: user) != tokens.consentToken(request: request, user: UUID()))
    }

    @Test func redirectsCarryTheIssuerAndEscapeValues() {
        let url = OAuthServer.url("https://agent.example/cb?keep=1", ["code": "a b&c", "state": nil], issuer: "https://relay.example")
        #expect(url == "https://agent.example/cb?keep=1&code=a%20b%26c&iss=https%3A%2F%2Frelay.example")
    }
}
