import Crypto
import Foundation
import JSON

/// The relay's own access tokens: HS256 JWTs under a key derived from the secret every
/// instance reads from the database (the agent-key signing secret; HMAC-SHA-256 of it with
/// a label of their own, so neither kind of credential can stand for the other). Claims:
/// `iss` the relay, `aud` the resource the token is for (RFC 8707), `sub` the person,
/// `client_id`, `session_id` the token family (checked alive on every instance, so a
/// revoke reaches every token of it within the session check's 4 s), `email`, `scope`,
/// `iat`, `exp`, `jti`. Nothing of them is stored.
struct AccessTokens: Sendable {
    let issuer: String
    /// The resource URLs the relay answers for: its `/mcp` endpoint and its origin.
    let audiences: [String]
    fileprivate let key: [UInt8]

    /// The label the signing key is derived with.
    private static let label = Array("whereabot oauth access token v1".utf8)

    init(secret: [UInt8], issuer: String) {
        self.key = Digest.hmacSHA256(key: secret, Self.label)
        self.issuer = issuer
        self.audiences = Self.resources(publicURL: issuer)
    }

    /// The resources a token of this relay may name: `PUBLIC_URL/mcp`, `PUBLIC_URL` and
    /// `PUBLIC_URL/` (RFC 8707 lets a client name the server's origin).
    static func resources(publicURL: String) -> [String] { [publicURL + "/mcp", publicURL, publicURL + "/"] }

    /// A signed access token of `family` for `resource`, living `lifetime` seconds from `now`.
    func sign(_ family: OAuthFamily, resource: String, lifetime: Int, now: Date) throws -> String {
        let issuedAt = Int(now.timeIntervalSince1970)
        var claims: [String: JSONValue] = [
            "iss": .string(issuer), "aud": .string(resource), "sub": .string(family.userID.uuidString.lowercased()),
            "client_id": .string(family.clientID), "session_id": .string(family.familyID.uuidString.lowercased()),
            "scope": .string(family.scope), "iat": .number(Double(issuedAt)), "exp": .number(Double(issuedAt + lifetime)),
            "jti": .string(Base64URL.encode(try SecureRandom.bytes(16))),
        ]
        if let email = family.email { claims["email"] = .string(email) }
        return JWTSigner.hs256(claims: .object(claims), key: key)
    }

    /// The verifier of these tokens.
    var verifier: JWTVerifier { JWTVerifier(relayKey: key, issuer: issuer, audiences: audiences) }
}

extension AccessTokens {
    /// The token the consent page's Approve or Deny must carry for `request` and `user`
    /// (HMAC under the signing key with a label of its own): a page that did not load the
    /// request as that person cannot decide it, and a request is decided once.
    func consentToken(request: UUID, user: UUID) -> String {
        let message = Array("consent \(request.uuidString.lowercased()) \(user.uuidString.lowercased())".utf8)
        return Base64URL.encode(Digest.hmacSHA256(key: key, message).prefix(24))
    }
}
