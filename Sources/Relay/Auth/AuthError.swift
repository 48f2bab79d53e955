/// Why a credential was refused. Codes are stable; descriptions never contain the token,
/// its claims or key material. Every case answers 401 to an agent, except where the relay
/// maps `wrongCredentialKind` to 403 (an agent token on a phone route).
public enum AuthError: Error, Equatable, Sendable, CustomStringConvertible {
    /// No `Authorization: Bearer ...` header.
    case missing
    /// Not three base64url parts of JSON, or claims of the wrong type.
    case malformed
    /// `alg` is not HS256, ES256 or RS256 (including `none`), or does not fit the key.
    case unsupportedAlgorithm
    /// No configured key matches (unknown `kid`, or no HMAC secret for HS256).
    case unknownKey
    /// The signature does not verify.
    case badSignature
    /// `exp` has passed (beyond the leeway) or is missing.
    case expired
    /// `nbf` is still in the future (beyond the leeway).
    case notYetValid
    /// `aud` does not contain `authenticated`, `role` is not `authenticated`, or `iss` differs.
    case wrongAudience
    /// `sub` is not a UUID.
    case badSubject
    /// The session behind the token was signed out (`auth.sessions` row gone).
    case revoked
    /// An unknown or revoked agent key.
    case unknownAgentKey
    /// A phone credential on an agent route, or an agent credential on a phone route.
    case wrongCredentialKind
    /// A JWKS document or key could not be used.
    case badKey
    /// The database could not be asked (503 with Retry-After, not 401).
    case unavailable
    /// The token has no `session_id` (Supabase's always do): it could never be revoked.
    case noSession
    /// The session was revoked by removing a device it registered (403 on phone routes).
    case deviceRemoved
    /// Too many failed authentications from this client address (429 with Retry-After).
    case rateLimited

    public var description: String {
        switch self {
        case .missing: "AuthError(missing)"
        case .malformed: "AuthError(malformed)"
        case .unsupportedAlgorithm: "AuthError(unsupportedAlgorithm)"
        case .unknownKey: "AuthError(unknownKey)"
        case .badSignature: "AuthError(badSignature)"
        case .expired: "AuthError(expired)"
        case .notYetValid: "AuthError(notYetValid)"
        case .wrongAudience: "AuthError(wrongAudience)"
        case .badSubject: "AuthError(badSubject)"
        case .revoked: "AuthError(revoked)"
        case .unknownAgentKey: "AuthError(unknownAgentKey)"
        case .wrongCredentialKind: "AuthError(wrongCredentialKind)"
        case .badKey: "AuthError(badKey)"
        case .unavailable: "AuthError(unavailable)"
        case .noSession: "AuthError(noSession)"
        case .deviceRemoved: "AuthError(deviceRemoved)"
        case .rateLimited: "AuthError(rateLimited)"
        }
    }
}
