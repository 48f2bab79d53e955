import Foundation
@testable import Relay
@testable import RelayCore
import TestSupport
import Testing

/// Supabase access tokens: the algorithm bound to the key, and every claim checked.
@Suite struct JWTVerifierTests {
    static let secret = "super-secret-jwt-token-with-at-least-32-characters"
    static let rsa = TestKey(.rsa, kid: "rsa-1")
    static let ec = TestKey(.p256, kid: "ec-1")
    static var jwks: Data {
        try! JSONSerialization.data(withJSONObject: ["keys": [rsa.jwk, ec.jwk]])
    }

    func verifier(secret: String? = JWTVerifierTests.secret, issuer: String? = nil) throws -> JWTVerifier {
        try JWTVerifier(hmacSecret: secret, jwks: Self.jwks, issuer: issuer)
    }

    func hs256(_ claims: [String: Any], secret: String = JWTVerifierTests.secret, header: [String: Any] = ["alg": "HS256", "typ": "JWT"]) -> String {
        TestToken.make(header: header, claims: claims) { TestToken.hmac(Array(secret.utf8), $0) }
    }

    @Test func hs256SessionTokenVerifies() throws {
        let user = UUID(), session = UUID()
        var sent = TestToken.claims(user: user)
        sent["session_id"] = session.uuidString.lowercased()
        let claims = try verifier().verify(hs256(sent))
        #expect(claims.userID == user)
        #expect(claims.email == "ada@example.com")
        #expect(claims.clientID == nil && !claims.isAgentToken)
        #expect(claims.sessionID == session)
    }

    @Test func agentTokenCarriesClientID() throws {
        let claims = try verifier().verify(hs256(TestToken.claims(clientID: "6f1d0c1e-5b1a-4c1e-9a55-0a9f3c1e7b21")))
        #expect(claims.isAgentToken)
        #expect(claims.clientID == "6f1d0c1e-5b1a-4c1e-9a55-0a9f3c1e7b21")
    }

    /// OAUTH_AUDIENCE: an OAuth client's token must carry it besides `authenticated` (the
    /// project's access-token hook adds it, RFC 8707); a phone's session token need not.
    @Test func theRelaysAudienceIsRequiredOfOAuthClientsTokens() throws {
        let verifier = try JWTVerifier(hmacSecret: Self.secret, audience: "https://relay.example/mcp")
        var agent = TestToken.claims(clientID: "6f1d0c1e-5b1a-4c1e-9a55-0a9f3c1e7b21")
        #expect(throws: AuthError.wrongAudience) { try verifier.verify(hs256(agent)) }
        agent["aud"] = ["authenticated", "https://other.example/mcp"]
        #expect(throws: AuthError.wrongAudience) { try verifier.verify(hs256(agent)) }
        agent["aud"] = ["https://relay.example/mcp"]
        #expect(throws: AuthError.wrongAudience) { try verifier.verify(hs256(agent)) }  // authenticated is still required
        agent["aud"] = ["authenticated", "https://relay.example/mcp"]
        #expect(try verifier.verify(hs256(agent)).isAgentToken)
        #expect(try !verifier.verify(hs256(TestToken.claims())).isAgentToken)  // a phone's session token
        #expect(try self.verifier().verify(hs256(TestToken.claims(clientID: "c"))).isAgentToken)  // unset: not checked
    }

    @Test func es256AndRS256FromTheJWKSVerify() throws {
        let verifier = try verifier(secret: nil)
        for key in [Self.rsa, Self.ec] {
            let alg = key.kind == .rsa ? "RS256" : "ES256"
            let token = TestToken.make(header: ["alg": alg, "kid": key.kid, "typ": "JWT"], claims: TestToken.claims(), sign: key.sign)
            #expect(throws: Never.self) { try verifier.verify(token) }
        }
        #expect(verifier.knowsKey(id: "ec-1") && !verifier.knowsKey(id: "other"))
    }

    @Test func tamperedPayloadFails() throws {
        let token = hs256(TestToken.claims())
        let parts = token.split(separator: ".")
        let forged = parts[0] + "." + base64url(Array(try JSONSerialization.data(withJSONObject: TestToken.claims()))) + "." + parts[2]
        #expect(throws: AuthError.badSignature) { try verifier().verify(String(forged)) }
        #expect(throws: AuthError.badSignature) { try verifier().verify(hs256(TestToken.claims(), secret: "another-secret-of-at-least-32-chars!!")) }
    }

    @Test func algNoneIsRefused() throws {
        let token = TestToken.make(header: ["alg": "none", "typ": "JWT"], claims: TestToken.claims()) { _ in [] }
        #expect(throws: AuthError.unsupportedAlgorithm) { try verifier().verify(token) }
        let lower = TestToken.make(header: ["alg": "None"], claims: TestToken.claims()) { _ in [] }
        #expect(throws: AuthError.unsupportedAlgorithm) { try verifier().verify(lower) }
    }

    /// The classic confusion: HS256 "signed" with the public key's bytes as the secret.
    @Test func hs256WithThePublicKeyIsRefused() throws {
        let forged = TestToken.make(header: ["alg": "HS256", "kid": "rsa-1"], claims: TestToken.claims()) {
            TestToken.hmac(Self.rsa.publicDER, $0)
        }
        #expect(throws: AuthError.unknownKey) { try verifier(secret: nil).verify(forged) }
        #expect(throws: AuthError.badSignature) { try verifier().verify(forged) }
    }

    @Test func algorithmMustFitTheKeyType() throws {
        let wrong = TestToken.make(header: ["alg": "RS256", "kid": "ec-1"], claims: TestToken.claims(), sign: Self.ec.sign)
        #expect(throws: AuthError.unsupportedAlgorithm) { try verifier().verify(wrong) }
        let unknown = TestToken.make(header: ["alg": "ES256", "kid": "ec-9"], claims: TestToken.claims(), sign: Self.ec.sign)
        #expect(throws: AuthError.unknownKey) { try verifier().verify(unknown) }
    }

    @Test func timeIsCheckedWithLeeway() throws {
        let now = Date()
        var claims = TestToken.claims(now: now)
        claims["exp"] = Int(now.timeIntervalSince1970) - 10
        #expect(throws: Never.self) { try verifier().verify(hs256(claims), now: now) }
        #expect(throws: AuthError.expired) { try verifier().verify(hs256(claims), now: now.addingTimeInterval(60)) }
        claims["exp"] = nil
        #expect(throws: AuthError.expired) { try verifier().verify(hs256(claims), now: now) }
        claims = TestToken.claims(now: now)
        claims["nbf"] = Int(now.timeIntervalSince1970) + 120
        #expect(throws: AuthError.notYetValid) { try verifier().verify(hs256(claims), now: now) }
    }

    @Test func audienceRoleIssuerAndSubjectAreChecked() throws {
        var claims = TestToken.claims()
        claims["aud"] = "anon-audience"
        #expect(throws: AuthError.wrongAudience) { try verifier().verify(hs256(claims)) }
        claims["aud"] = ["other", "authenticated"]
        #expect(throws: Never.self) { try verifier().verify(hs256(claims)) }
        claims["role"] = "anon"
        #expect(throws: AuthError.wrongAudience) { try verifier().verify(hs256(claims)) }
        claims = TestToken.claims()
        #expect(throws: Never.self) { try verifier(issuer: "http://127.0.0.1:54321/auth/v1").verify(hs256(claims)) }
        #expect(throws: AuthError.wrongAudience) { try verifier(issuer: "https://evil.example/auth/v1").verify(hs256(claims)) }
        claims["sub"] = "not-a-uuid"
        #expect(throws: AuthError.badSubject) { try verifier().verify(hs256(claims)) }
    }

    @Test(arguments: ["", "a.b", "a.b.c.d", "!!.@@.##", "e30.e30.", "bm90IGpzb24.bm90IGpzb24.c2ln"])
    func malformedTokensAreRefused(token: String) throws {
        #expect(throws: AuthError.self) { try verifier().verify(token) }
    }

    /// Errors never repeat the token.
    @Test func errorDescriptionsHoldNoToken() throws {
        let token = hs256(TestToken.claims(), secret: "wrong-secret-wrong-secret-wrong-secret!")
        do {
            _ = try verifier().verify(token)
            Issue.record("expected a failure")
        } catch {
            #expect(!"\(error)".contains(token.prefix(20)))
            #expect("\(error)" == "AuthError(badSignature)")
        }
    }

    @Test func unusableJWKSIsRefused() {
        #expect(throws: AuthError.badKey) { try JWTVerifier(jwks: Data("not json".utf8)) }
        #expect(throws: AuthError.badKey) { try JWTVerifier(jwks: Data(#"{"keys":[{"kty":"EC","crv":"P-256","x":"AA","y":"AA"}]}"#.utf8)) }
    }
}

extension JWTVerifier {
    /// Verifies `token` at the system's time now (these tests' tokens are fresh).
    func verify(_ token: String) throws(AuthError) -> JWTClaims {
        try verify(token, now: Date())
    }
}
