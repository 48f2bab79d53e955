import Foundation

/// The verified claims of a Supabase access token that the relay uses.
public struct JWTClaims: Sendable, Equatable {
    /// The user (`sub`).
    public let userID: UUID
    /// The session (`session_id`), checked against `auth.sessions`; required.
    public let sessionID: UUID
    /// The OAuth client (`client_id`) for an agent's token; nil for the user's own session,
    /// which makes the token a phone credential.
    public let clientID: String?
    /// The user's email, when the token carries one.
    public let email: String?
    /// When the token expires.
    public let expiresAt: Date

    /// True for an agent's token (it has `client_id`).
    public var isAgentToken: Bool { clientID != nil }
}
