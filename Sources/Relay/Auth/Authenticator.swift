import Foundation

/// Turns an `Authorization: Bearer ...` header into a `Credential`, with short caches.
///
/// - JWTs verify with `JWTVerifier`; an unknown `kid` refetches the JWKS at most once per
///   `jwksRefetchInterval`. The token's session must still exist (checked in
///   `auth.sessions`, cached for `sessionCacheTTL`).
/// - Agent keys (`wb_...`) are looked up by SHA-256, cached for `keyCacheTTL`; the
///   `whereabot_key` notification drops a revoked key at once (`dropKey`).
/// - Caches are bounded (`maximumCacheEntries`); a full cache is emptied, never grown.
public actor Authenticator {
    /// How long a session check is trusted.
    public static let defaultSessionCacheTTL: TimeInterval = 5
    /// How long an agent key lookup is trusted (revocation also drops it at once).
    public static let defaultKeyCacheTTL: TimeInterval = 60
    /// How long "no such agent key" is remembered (short: a new key works almost at once).
    public static let unknownKeyCacheTTL: TimeInterval = 5
    /// Minimum time between JWKS refetches caused by unknown key ids.
    public static let jwksRefetchInterval: TimeInterval = 60
    /// Entries per cache before it is emptied.
    public static let maximumCacheEntries = 10_000

    private var verifier: JWTVerifier
    private let hmacSecret: String?
    private let issuer: String?
    private let jwksSource: JWKSSource
    private let database: RelayDatabase
    private let sessionCacheTTL: TimeInterval
    private let keyCacheTTL: TimeInterval
    private let now: @Sendable () -> Date
    private var lastJWKSFetch: Date
    private var sessions: [UUID: (alive: Bool, at: Date)] = [:]
    private var keys: [String: (owner: RelayDatabase.AgentKeyOwner?, at: Date)] = [:]

    /// Creates an authenticator; loads the JWKS now.
    /// - Parameters:
    ///   - hmacSecret: SUPABASE_JWT_SECRET, if set.
    ///   - jwks: where ES256/RS256 keys come from.
    ///   - issuer: the expected `iss` (`SUPABASE_URL/auth/v1`), if SUPABASE_URL is set.
    ///   - database: for sessions and agent keys.
    public init(hmacSecret: String?, jwks: JWKSSource, issuer: String?, database: RelayDatabase,
                sessionCacheTTL: TimeInterval = Authenticator.defaultSessionCacheTTL,
                keyCacheTTL: TimeInterval = Authenticator.defaultKeyCacheTTL,
                now: @escaping @Sendable () -> Date = { Date() }) throws {
        self.hmacSecret = hmacSecret
        self.issuer = issuer
        self.jwksSource = jwks
        self.database = database
        self.sessionCacheTTL = sessionCacheTTL
        self.keyCacheTTL = keyCacheTTL
        self.now = now
        self.verifier = try JWTVerifier(hmacSecret: hmacSecret, jwks: jwks.load(), issuer: issuer)
        self.lastJWKSFetch = now()
    }

    /// The credential behind an Authorization header value.
    public func authenticate(_ authorization: String?) async throws(AuthError) -> Credential {
        guard let authorization, authorization.count > 7, authorization.prefix(7).lowercased() == "bearer " else {
            throw .missing
        }
        let token = authorization.dropFirst(7).trimmingCharacters(in: .whitespaces)
        guard !token.isEmpty else { throw .missing }
        if AgentKey.looksLikeKey(token) { return try await agentKey(token) }
        return try await jwt(token)
    }

    /// The agent behind the header; a phone's token is `wrongCredentialKind`.
    public func agent(_ authorization: String?) async throws(AuthError) -> AgentIdentity {
        guard case .agent(let agent) = try await authenticate(authorization) else { throw .wrongCredentialKind }
        return agent
    }

    /// The phone behind the header; an agent's credential is `wrongCredentialKind`.
    public func phone(_ authorization: String?) async throws(AuthError) -> PhoneIdentity {
        guard case .phone(let phone) = try await authenticate(authorization) else { throw .wrongCredentialKind }
        return phone
    }

    /// Forgets a revoked (or deleted) agent key at once (`whereabot_key`).
    public func dropKey(id: UUID) {
        keys = keys.filter { $0.value.owner?.keyID != id }
    }

    private func agentKey(_ key: String) async throws(AuthError) -> Credential {
        let hash = AgentKey.hash(key)
        let owner: RelayDatabase.AgentKeyOwner?
        if let cached = keys[hash], now().timeIntervalSince(cached.at) < (cached.owner == nil ? Self.unknownKeyCacheTTL : keyCacheTTL) {
            owner = cached.owner
        } else {
            do {
                owner = try await database.agentKeyOwner(keyHash: hash)
            } catch {
                throw .unavailable
            }
            if keys.count >= Self.maximumCacheEntries { keys.removeAll() }
            keys[hash] = (owner, now())
        }
        guard let owner else { throw .unknownAgentKey }
        return .agent(AgentIdentity(userID: owner.userID, clientID: AgentIdentity.agentKeyClientID,
                                    keyID: owner.keyID, keyName: owner.keyName, email: owner.email))
    }

    private func jwt(_ token: String) async throws(AuthError) -> Credential {
        let claims: JWTClaims
        do {
            claims = try verifier.verify(token, now: now())
        } catch .unknownKey {
            try refetchJWKS(for: token)
            claims = try verifier.verify(token, now: now())
        }
        if let session = claims.sessionID {
            guard try await sessionAlive(session, user: claims.userID) else { throw .revoked }
        }
        if let clientID = claims.clientID {
            return .agent(AgentIdentity(userID: claims.userID, clientID: clientID, keyID: nil, keyName: nil, email: claims.email))
        }
        return .phone(PhoneIdentity(userID: claims.userID, sessionID: claims.sessionID, email: claims.email))
    }

    /// Reloads the JWKS when a token names an unknown key, at most once a minute.
    private func refetchJWKS(for token: String) throws(AuthError) {
        guard jwksSource != .none, let kid = JWTVerifier.keyID(of: token), !verifier.knowsKey(id: kid),
              now().timeIntervalSince(lastJWKSFetch) >= Self.jwksRefetchInterval else { throw .unknownKey }
        lastJWKSFetch = now()
        do {
            verifier = try JWTVerifier(hmacSecret: hmacSecret, jwks: jwksSource.load(), issuer: issuer)
        } catch {
            throw .unknownKey
        }
    }

    private func sessionAlive(_ session: UUID, user: UUID) async throws(AuthError) -> Bool {
        if let cached = sessions[session], now().timeIntervalSince(cached.at) < sessionCacheTTL { return cached.alive }
        let alive: Bool
        do {
            alive = try await database.sessionAlive(session: session, user: user)
        } catch {
            throw .unavailable
        }
        if sessions.count >= Self.maximumCacheEntries { sessions.removeAll() }
        sessions[session] = (alive, now())
        return alive
    }
}
