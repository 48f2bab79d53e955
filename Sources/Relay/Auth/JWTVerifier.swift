import Crypto
import Foundation
import JSON

/// Verifies Supabase access tokens (RFC 7519 JWS compact form).
///
/// The algorithm is bound to the key type: HS256 only with the shared secret
/// (SUPABASE_JWT_SECRET), RS256 only with an RSA key and ES256 only with a P-256 key from
/// the JWKS, so `none` and "HS256 signed with the public key" never pass. Then `exp`/`nbf`
/// with a small leeway, `aud` containing `authenticated`, `role` = `authenticated`, a UUID
/// `sub`, `iss` when an issuer is configured, and — for an OAuth client's token (one with
/// `client_id`) — the relay's own audience when one is configured (`OAUTH_AUDIENCE`, for
/// projects whose access-token hook adds it, RFC 8707). The session check (auth.sessions)
/// is the caller's, since it needs the database.
///
/// The relay's own access tokens (`AccessTokens`, the relay as the agents' authorization
/// server) verify with `init(relayKey:issuer:audiences:)`: HS256 under the relay's key only,
/// `iss` the relay, `aud` one of the relay's resource URLs (RFC 8707: a token minted for
/// another resource is refused), and a `client_id` — never `role` or `authenticated`.
public struct JWTVerifier: Sendable {
    /// Clock skew tolerated on `exp` and `nbf`.
    public static let defaultLeeway: TimeInterval = 30

    private let hmacSecret: [UInt8]?
    private let keys: [PublicKey]
    private let issuer: String?
    private let audience: String?
    private let leeway: TimeInterval
    /// For the relay's own tokens: the audiences one of which `aud` must name (nil: a
    /// Supabase token, `authenticated`).
    private let relayAudiences: [String]?

    /// Creates a verifier.
    /// - Parameters:
    ///   - hmacSecret: the project's JWT secret for HS256 tokens, if any.
    ///   - jwks: a JWKS document (`{"keys": [...]}`) for ES256/RS256 tokens, if any.
    ///   - issuer: the expected `iss` (`SUPABASE_URL/auth/v1`), or nil to skip the check.
    ///   - audience: an `aud` an OAuth client's token must carry besides `authenticated`, or nil.
    ///   - leeway: clock skew tolerated on `exp` and `nbf`.
    /// - Throws: `AuthError.badKey` when the JWKS cannot be read.
    public init(hmacSecret: String? = nil, jwks: Data? = nil, issuer: String? = nil, audience: String? = nil,
                leeway: TimeInterval = JWTVerifier.defaultLeeway) throws {
        self.hmacSecret = hmacSecret.flatMap { $0.isEmpty ? nil : Array($0.utf8) }
        self.keys = try jwks.map(Self.readJWKS) ?? []
        self.issuer = issuer
        self.audience = audience
        self.leeway = leeway
        self.relayAudiences = nil
    }

    /// A verifier of the relay's own access tokens: HS256 under `relayKey`, `iss` equal to
    /// `issuer`, `aud` naming one of `audiences`, with a `client_id`.
    public init(relayKey: [UInt8], issuer: String, audiences: [String], leeway: TimeInterval = JWTVerifier.defaultLeeway) {
        self.hmacSecret = relayKey
        self.keys = []
        self.issuer = issuer
        self.audience = nil
        self.leeway = leeway
        self.relayAudiences = audiences
    }

    /// The `iss` claim of a token (without verifying anything), to choose its verifier.
    public static func issuer(of token: String) -> String? {
        let parts = token.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 3, let bytes = Base64URL.decode(parts[1]), let json = JSONValue.parse(bytes: bytes) else { return nil }
        return json["iss"]?.string
    }

    /// Whether a key with this `kid` is known (to decide on refetching the JWKS).
    public func knowsKey(id: String) -> Bool { keys.contains { $0.kid == id } }

    /// The `kid` of a token's header, if it has one (without verifying anything).
    public static func keyID(of token: String) -> String? {
        guard let header = token.split(separator: ".", omittingEmptySubsequences: false).first,
              let bytes = Base64URL.decode(header),
              let json = JSONValue.parse(bytes: bytes) else { return nil }
        return json["kid"]?.string
    }

    /// Verifies `token` at time `now` (the caller's clock: `exp` and `nbf` are compared with it).
    public func verify(_ token: String, now: Date) throws(AuthError) -> JWTClaims {
        let parts = token.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 3, let headerBytes = Base64URL.decode(parts[0]), let payloadBytes = Base64URL.decode(parts[1]),
              let signature = Base64URL.decode(parts[2]),
              let header = JSONValue.parse(bytes: headerBytes)?.object,
              let payload = JSONValue.parse(bytes: payloadBytes)?.object else {
            throw .malformed
        }
        let message = Array(token.utf8.prefix(parts[0].utf8.count + 1 + parts[1].utf8.count))
        try checkSignature(header: header, signature: signature, message: message)
        return try checkClaims(payload, now: now)
    }

    private func checkSignature(header: [String: JSONValue], signature: [UInt8], message: [UInt8]) throws(AuthError) {
        if let typ = header["typ"]?.string, typ.uppercased() != "JWT" { throw .malformed }
        let kid = header["kid"]?.string
        switch header["alg"]?.string {
        case "HS256":
            guard let hmacSecret else { throw .unknownKey }
            guard Digest.constantTimeEqual(Digest.hmacSHA256(key: hmacSecret, message), signature) else { throw .badSignature }
        case "RS256":
            try verifyWithKey(kind: .rsa, kid: kid, signature: signature, message: message)
        case "ES256":
            try verifyWithKey(kind: .p256, kid: kid, signature: signature, message: message)
        default:
            throw .unsupportedAlgorithm
        }
    }

    private func verifyWithKey(kind: PublicKey.Kind, kid: String?, signature: [UInt8], message: [UInt8]) throws(AuthError) {
        let candidates = keys.filter { $0.kind == kind && (kid == nil || $0.kid == kid) }
        guard !candidates.isEmpty else {
            // A kid naming a key of the other type means the algorithm does not fit the key.
            if let kid, keys.contains(where: { $0.kid == kid }) { throw .unsupportedAlgorithm }
            throw .unknownKey
        }
        guard candidates.contains(where: { $0.verify(signature: signature, message: message) }) else { throw .badSignature }
    }

    private func checkClaims(_ claims: [String: JSONValue], now: Date) throws(AuthError) -> JWTClaims {
        guard let exp = claims["exp"]?.number else { throw .expired }
        guard now.timeIntervalSince1970 < exp + leeway else { throw .expired }
        if let nbfValue = claims["nbf"] {
            guard let nbf = nbfValue.number else { throw .malformed }
            guard nbf - leeway <= now.timeIntervalSince1970 else { throw .notYetValid }
        }
        let audiences: [String]
        switch claims["aud"] {
        case .string(let single): audiences = [single]
        case .array(let many) where many.allSatisfy({ $0.string != nil }): audiences = many.compactMap(\.string)
        default: throw .wrongAudience
        }
        if let relayAudiences {
            guard audiences.contains(where: relayAudiences.contains), claims["client_id"]?.string?.isEmpty == false else {
                throw .wrongAudience
            }
        } else {
            guard audiences.contains("authenticated"), claims["role"]?.string == "authenticated" else { throw .wrongAudience }
        }
        if let issuer, claims["iss"]?.string != issuer { throw .wrongAudience }
        guard let sub = claims["sub"]?.string, let userID = UUID(uuidString: sub) else { throw .badSubject }
        // Supabase's access tokens always carry a session; one without could never be revoked.
        guard let session = claims["session_id"] else { throw .noSession }
        guard let text = session.string, let sessionID = UUID(uuidString: text) else { throw .malformed }
        if let client = claims["client_id"], client.string == nil { throw .malformed }
        let clientID = claims["client_id"]?.string
        if let audience, let clientID, !clientID.isEmpty, !audiences.contains(audience) { throw .wrongAudience }
        if let email = claims["email"], email.string == nil { throw .malformed }
        return JWTClaims(userID: userID, sessionID: sessionID,
                         clientID: clientID.flatMap { $0.isEmpty ? nil : $0 },
                         email: claims["email"]?.string.flatMap { $0.isEmpty ? nil : $0 },
                         expiresAt: Date(timeIntervalSince1970: exp))
    }

    private static func readJWKS(_ data: Data) throws -> [PublicKey] {
        guard let document = JSONValue.parse(bytes: data), let entries = document["keys"]?.array,
              entries.allSatisfy({ $0.object != nil }) else { throw AuthError.badKey }
        return try entries.compactMap { try PublicKey.fromJWK($0) }
    }
}
