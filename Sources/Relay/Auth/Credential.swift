import Foundation

/// Who presented a credential, once it verified.
public enum Credential: Sendable, Equatable {
    /// An agent: an OAuth access token with `client_id`, or an agent key. It may ask.
    case agent(AgentIdentity)
    /// A phone: the user's own session token (no `client_id`). It may answer.
    case phone(PhoneIdentity)
}

/// An agent acting for a user.
public struct AgentIdentity: Sendable, Equatable {
    /// The user whose phones the agent may ask for.
    public let userID: UUID
    /// The OAuth client id, or `agent-key` for agent keys.
    public let clientID: String
    /// The agent key's id and name (nil for OAuth tokens).
    public let keyID: UUID?
    /// The agent key's name, shown as the agent's name (OAuth names come from the database).
    public let keyName: String?
    /// The user's email, for the "signed in as EMAIL" hint.
    public let email: String?

    /// The client id agent keys share.
    public static let agentKeyClientID = "agent-key"
}

/// A phone signed in as a user.
public struct PhoneIdentity: Sendable, Equatable {
    /// The user.
    public let userID: UUID
    /// The session behind the token (revoking it closes the phone's sockets).
    public let sessionID: UUID
    /// The user's email.
    public let email: String?
    /// When the token expires (a socket closes 4001 "token_expired" after this plus the
    /// leeway unless the phone sends a fresh token).
    public let expiresAt: Date

    /// Creates a phone identity.
    public init(userID: UUID, sessionID: UUID, email: String?, expiresAt: Date) {
        self.userID = userID
        self.sessionID = sessionID
        self.email = email
        self.expiresAt = expiresAt
    }
}
