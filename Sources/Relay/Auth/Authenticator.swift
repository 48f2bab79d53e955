import Foundation
import HTTPServer
import RelayCore
import Synchronization

/// Turns an `Authorization: Bearer ...` header into a `Credential`, with short caches.
///
/// - JWTs verify with `JWTVerifier`. The JWKS is read again on a schedule
///   (`refreshKeys()`: its `Cache-Control` `max-age` within `jwksRefresh`, 10 minutes to an
///   hour by default), so a withdrawn key is refused within one refresh; an unknown `kid` or
///   a signature that does not verify refetches it at most once per `jwksRefetchInterval`. The token's session must still exist (checked in
///   `auth.sessions`, cached for `sessionCacheTTL` for agents; a phone's session is
///   checked once per socket and not cached).
/// - A token whose `iss` is the relay itself (`relayIssuer`) is one of the relay's own
///   access tokens (`AccessTokens`) and verifies under the relay's key only; its
///   `session_id` names its token family, checked alive as a session is.
/// - Agent keys (`wb_...`) are looked up by SHA-256, cached for `keyCacheTTL`; the
///   `whereabot_key` notification drops a revoked key at once (`dropKey`).
/// - Caches are bounded (`maximumCacheEntries`); a full cache is emptied, never grown.
/// - Failed authentications are counted per client address (an IPv6 one per /64, /56 and
///   /48, `FailureBudget`); an
///   address over its budget gets `rateLimited` for anything that would cost a database
///   lookup or fails, so a flood of random keys never reaches the database.
/// - Nothing here blocks: the JWKS refetch runs on a thread of its own while the actor
///   keeps answering (tokens with the unknown `kid` fail meanwhile).
public actor Authenticator {
    /// How long a session check is trusted: under 5 s, so that a revoked OAuth grant (its
    /// sessions deleted) or a signed-out session is refused within 5 s of the revoke (docs/protocol.md, "Sign-in").
    public static let defaultSessionCacheTTL: TimeInterval = 4
    /// How long an agent key lookup is trusted (revocation also drops it at once).
    public static let defaultKeyCacheTTL: TimeInterval = 60
    /// How long "no such agent key" is remembered (short: a new key works almost at once).
    public static let unknownKeyCacheTTL: TimeInterval = 5
    /// Minimum time between JWKS refetches caused by unknown key ids or bad signatures.
    public static let jwksRefetchInterval: TimeInterval = 60
    /// How long a JWKS is kept before it is read again: its `max-age`, at least 10 minutes
    /// and at most an hour.
    public static let defaultJWKSRefresh: ClosedRange<TimeInterval> = 600...3600
    /// Entries per cache before it is emptied.
    public static let maximumCacheEntries = 10_000
    /// Verified tokens remembered before that cache is emptied (a token is up to ~1 kB).
    public static let maximumVerifiedTokens = 1_000

    private var verifier: JWTVerifier
    private let hmacSecret: String?
    private let issuer: String?
    private let audience: String?
    private let jwksSource: JWKSSource
    private let database: RelayDatabase
    private let sessionChecker: SessionChecker
    let sessionCacheTTL: TimeInterval
    let keyCacheTTL: TimeInterval
    /// Bounds of the time between scheduled JWKS reads.
    let jwksRefresh: ClosedRange<TimeInterval>
    /// When the scheduled JWKS read is due next, in seconds after the last read.
    private(set) var keysRefreshAfter: TimeInterval
    /// The instance's clock: caches' ages, budgets, the JWKS schedule and tokens' `exp`.
    let clock: RelayClock
    private var lastJWKSFetch: Date
    /// What is remembered about sessions, agent keys and agents' tokens.
    let memory = Mutex(Memory())
    private var limiter = FailureBudget()
    /// The agent-key signing secret, read once (`AgentKey.isSigned`); nil until then.
    private var keySecret: [UInt8]?
    /// When reading the secret last failed: it is not asked again for `keySecretRetry`, so
    /// that keys from an address over its budget never turn into a database call each.
    private var keySecretFailedAt: Date?
    /// How long after a failed read the signing secret is not asked for again.
    static let keySecretRetry: TimeInterval = 10
    /// Where a failed read of the signing secret is logged (and counted); none in tests.
    private let logger: Logger?
    /// The relay's own issuer (`PUBLIC_URL`), whose access tokens it signs; nil: none.
    private let relayIssuer: String?
    /// The relay's own access tokens, once the signing secret has been read.
    private var relayTokens: AccessTokens?
    private var jwksFetchInFlight = false
    /// Whether the JWKS has been read (always, without a JWKS URL): until then a token
    /// signed with a key cannot be checked (503), not refused (401).
    private var keysLoaded: Bool
    private var rateLimitedCount = 0

    /// Creates an authenticator. A JWKS file is read now (a file that cannot be read is a
    /// setting to fix, thrown as `JWKSSource.LoadError`); a JWKS URL is fetched by
    /// `loadKeys()`, which its owner retries until it answers.
    /// - Parameters:
    ///   - hmacSecret: SUPABASE_JWT_SECRET, if set.
    ///   - jwks: where ES256/RS256 keys come from.
    ///   - issuer: the expected `iss` (`SUPABASE_URL/auth/v1`), if SUPABASE_URL is set.
    ///   - database: for sessions, agent keys and the agent-key signing secret.
    ///   - logger: where a failed read of the signing secret, or a session check the
    ///     database did not answer, is logged.
    ///   - clock: where the time is read (the instance's clock; the system's by default).
    package init(hmacSecret: String?, jwks: JWKSSource, issuer: String?, audience: String? = nil, database: RelayDatabase,
                 sessionCacheTTL: TimeInterval = Authenticator.defaultSessionCacheTTL,
                 keyCacheTTL: TimeInterval = Authenticator.defaultKeyCacheTTL,
                 logger: Logger? = nil, relayIssuer: String? = nil,
                 jwksRefresh: ClosedRange<TimeInterval> = Authenticator.defaultJWKSRefresh, clock: RelayClock = .system) throws {
        self.logger = logger
        self.jwksRefresh = jwksRefresh
        self.keysRefreshAfter = jwksRefresh.upperBound
        self.relayIssuer = relayIssuer
        self.hmacSecret = hmacSecret
        self.issuer = issuer
        self.audience = audience
        self.jwksSource = jwks
        self.database = database
        self.sessionChecker = SessionChecker(database: database, logger: logger)
        self.sessionCacheTTL = sessionCacheTTL
        self.keyCacheTTL = keyCacheTTL
        self.clock = clock
        if case .url = jwks {
            self.verifier = try JWTVerifier(hmacSecret: hmacSecret, issuer: issuer, audience: audience)
            self.keysLoaded = false
        } else {
            self.verifier = try jwks.verifier(hmacSecret: hmacSecret, issuer: issuer, audience: audience)
            self.keysLoaded = true
        }
        self.lastJWKSFetch = clock.date
    }

    /// Whether the signing keys still have to be fetched (a JWKS URL that has not answered).
    public var needsKeys: Bool { !keysLoaded }

    /// Fetches the JWKS once, on a thread of its own, and uses it; nil when the keys are
    /// loaded (now or before), else why not.
    public func loadKeys() async -> JWKSSource.LoadError? {
        guard !keysLoaded else { return nil }
        switch await fetchVerifier() {
        case .success(let loaded):
            use(loaded)
            return nil
        case .failure(let error):
            return error
        }
    }

    /// Reads the JWKS again (the scheduled refresh; nothing to read without a JWKS source):
    /// a key withdrawn from it is refused from now on, and tokens verified under the old
    /// set are verified again. A failed read keeps the keys already read and is tried again
    /// after the shortest interval. Returns when the next read is due, in seconds.
    public func refreshKeys() async -> TimeInterval {
        guard jwksSource != .none else { return jwksRefresh.upperBound }
        guard case .success(let loaded) = await fetchVerifier() else { return jwksRefresh.lowerBound }
        use(loaded)
        return keysRefreshAfter
    }

    /// Verifies with `loaded` from now on.
    private func use(_ loaded: JWKSSource.Loaded) {
        verifier = loaded.verifier
        keysLoaded = true
        lastJWKSFetch = clock.date
        // Without a max-age (a file, or no Cache-Control) the ceiling: read at least hourly.
        keysRefreshAfter = loaded.maxAge.map { min(max(TimeInterval($0), jwksRefresh.lowerBound), jwksRefresh.upperBound) }
            ?? jwksRefresh.upperBound
        memory.withLock { $0.verifiedTokens.removeAll() }  // a key may have been withdrawn
    }

    /// A failure of `client` that no credential shows (a socket that closed without its
    /// hello): it costs the address's budget as a failed credential does.
    public func recordFailure(client: String) {
        limiter.record(client, now: clock.date.timeIntervalSince1970)
    }

    /// A verifier over a fresh copy of the JWKS, read off the actor's executor.
    private func fetchVerifier() async -> Result<JWKSSource.Loaded, JWKSSource.LoadError> {
        let source = jwksSource, hmacSecret = self.hmacSecret, issuer = self.issuer, audience = self.audience
        return await withCheckedContinuation { continuation in
            let thread = Thread {
                continuation.resume(returning: Result { () throws(JWKSSource.LoadError) in
                    try source.keys(hmacSecret: hmacSecret, issuer: issuer, audience: audience)
                })
            }
            thread.name = "jwks-fetch"
            thread.start()
        }
    }

    /// The credential behind an Authorization header value, presented from `client` (the
    /// peer's address; failures are counted per address).
    public func authenticate(_ authorization: String?, client: String = "", checkingSession: Bool = true) async throws(AuthError)
        -> Credential {
        let limited = limiter.retryAfter(client, now: clock.date.timeIntervalSince1970) > 0
        do {
            return try await credential(authorization, limited: limited, checkingSession: checkingSession)
        } catch {
            try countFailure(error, client: client, limited: limited)
            throw error
        }
    }

    /// Counts a failed authentication of `client`; throws `rateLimited` when the client is
    /// past its budget (`limited`), so that the caller answers 429 instead of `error`.
    private func countFailure(_ error: AuthError, client: String, limited: Bool) throws(AuthError) {
        switch error {
        case .unavailable, .wrongCredentialKind, .missing:
            // No credential costs nothing and guesses nothing: always 401 with the metadata
            // pointer, which is how a client discovers where to sign in.
            break
        case .rateLimited:
            rateLimitedCount += 1
        default:
            if limited {
                rateLimitedCount += 1
                throw .rateLimited
            }
            limiter.record(client, now: clock.date.timeIntervalSince1970)
        }
    }

    /// The agent behind the header; a phone's token is `wrongCredentialKind`.
    public func agent(_ authorization: String?, client: String = "") async throws(AuthError) -> AgentIdentity {
        guard case .agent(let agent) = try await authenticate(authorization, client: client) else { throw .wrongCredentialKind }
        return agent
    }

    /// The phone behind the header; an agent's credential is `wrongCredentialKind`. Without
    /// `checkingSession` only what costs no database call is checked (signature, claims):
    /// `phoneSession(_:client:)` then checks the session, when the caller is ready to pay.
    public func phone(_ authorization: String?, client: String = "", checkingSession: Bool = true) async throws(AuthError)
        -> PhoneIdentity {
        guard case .phone(let phone) = try await authenticate(authorization, client: client, checkingSession: checkingSession)
        else { throw .wrongCredentialKind }
        return phone
    }

    /// Checks that a phone's verified token's session is still alive (one batched
    /// database call); a failure counts against `client` as a failed credential does.
    public func phoneSession(_ phone: PhoneIdentity, client: String = "") async throws(AuthError) {
        do {
            try await checkSession(phone.sessionID, user: phone.userID, cached: false)
        } catch {
            try countFailure(error, client: client, limited: limiter.retryAfter(client, now: clock.date.timeIntervalSince1970) > 0)
            throw error
        }
    }

    /// Seconds a client over its failure budget should wait (for Retry-After; at least 1).
    public func retryAfter(client: String) -> Int {
        max(1, limiter.retryAfter(client, now: clock.date.timeIntervalSince1970))
    }

    /// Verified tokens remembered now (bounded by `maximumVerifiedTokens`).
    var verifiedTokenCount: Int { memory.withLock { $0.verifiedTokens.count } }

    /// Requests refused with 429 so far (for /metrics).
    public var rateLimited: Int { rateLimitedCount }

    private func credential(_ authorization: String?, limited: Bool, checkingSession: Bool) async throws(AuthError) -> Credential {
        guard let token = Self.bearerToken(authorization) else { throw .missing }
        if AgentKey.looksLikeKey(token) { return try await agentKey(token, limited: limited) }
        return try await jwt(token, checkingSession: checkingSession)
    }

    /// The token of a `Bearer` Authorization header value; nil for anything else.
    static func bearerToken(_ authorization: String?) -> String? {
        guard let authorization, authorization.utf8.count > 7, authorization.utf8.count <= Self.maximumHeaderBytes,
              authorization.prefix(7).lowercased() == "bearer " else {
            return nil
        }
        let token = String(DisplayText.trimmingBlanks(authorization.dropFirst(7)))
        return token.isEmpty ? nil : token
    }

    /// The longest Authorization header looked at (Supabase's tokens are about 1 KiB).
    static let maximumHeaderBytes = 8 * 1024

    /// Forgets what was cached about a session (it was revoked: ask the database again).
    public func forgetSession(_ id: UUID) {
        memory.withLock { $0.sessions[id] = nil }
    }

    /// Forgets every remembered session state and agent key: the LISTEN connection was
    /// down, so a revocation's notification may have been missed, and each is asked of the
    /// database again (a cache entry never outlives a missed notification by more than the
    /// listener's gap).
    public func forgetRevocable() {
        memory.withLock { memory in
            memory.sessions.removeAll()
            memory.keys.removeAll()
        }
    }

    /// Forgets a revoked (or deleted) agent key at once (`whereabot_key`).
    public func dropKey(id: UUID) {
        memory.withLock { $0.keys = $0.keys.filter { $0.value.owner?.keyID != id } }
    }

    private func agentKey(_ key: String, limited: Bool) async throws(AuthError) -> Credential {
        let hash = AgentKey.hash(key)
        let owner: RelayDatabase.AgentKeyOwner?
        if let cached = memory.withLock({ $0.keys[hash] }),
           clock.date.timeIntervalSince(cached.at) < (cached.owner == nil ? Self.unknownKeyCacheTTL : keyCacheTTL) {
            owner = cached.owner
        } else {
            // No database round trip for an address over its budget — unless the key's
            // signature holds: strangers' failures never refuse a valid key.
            if limited, await !isSigned(key) { throw .rateLimited }
            do {
                owner = try await database.agentKeyOwner(keyHash: hash)
            } catch {
                throw .unavailable
            }
            let at = clock.date
            memory.withLock { memory in
                if memory.keys.count >= Self.maximumCacheEntries { memory.keys.removeAll() }
                memory.keys[hash] = (owner, at)
            }
        }
        guard let owner else { throw .unknownAgentKey }
        return .agent(owner.agent)
    }

    /// Whether `key` is signed; the secret is read from the database once (a failed read
    /// counts as unsigned, and is tried again `keySecretRetry` later).
    private func isSigned(_ key: String) async -> Bool {
        await loadKeySecret().map { AgentKey.isSigned(key, secret: $0) } ?? false
    }

    /// The signing secret, read from the database once (a failed read is logged and tried
    /// again `keySecretRetry` later; nil meanwhile).
    private func loadKeySecret() async -> [UInt8]? {
        if keySecret == nil, keySecretFailedAt.map({ clock.date.timeIntervalSince($0) >= Self.keySecretRetry }) ?? true {
            do {
                keySecret = try await database.agentKeySecret()
                keySecretFailedAt = nil
            } catch {
                keySecretFailedAt = clock.date
                logger?.failure("agent_key_secret_failed", error)
            }
        }
        return keySecret
    }

    /// The relay's own access tokens (to sign and to verify); nil without a relay issuer or
    /// while the signing secret cannot be read.
    func accessTokens() async -> AccessTokens? {
        if let relayTokens { return relayTokens }
        guard let relayIssuer, let secret = await loadKeySecret() else { return nil }
        relayTokens = AccessTokens(secret: secret, issuer: relayIssuer)
        return relayTokens
    }

    private func jwt(_ token: String, checkingSession: Bool) async throws(AuthError) -> Credential {
        let claims: JWTClaims
        if let cached = memory.withLock({ $0.verifiedTokens[token] }), clock.date < cached.expiresAt {
            claims = cached
        } else if let relayIssuer, JWTVerifier.issuer(of: token) == relayIssuer {
            guard let tokens = await accessTokens() else { throw .unavailable }
            claims = try tokens.verifier.verify(token, now: clock.date)
            remember(claims, of: token)
        } else {
            do {
                claims = try verifier.verify(token, now: clock.date)
            } catch .unknownKey {
                guard keysLoaded else { throw .unavailable }  // the JWKS URL has not answered yet
                try await refetchJWKS(for: token, failed: .unknownKey)
                claims = try verifier.verify(token, now: clock.date)
            } catch .badSignature {
                // The key may have been replaced under the same id: read the keys again.
                try await refetchJWKS(for: token, failed: .badSignature)
                claims = try verifier.verify(token, now: clock.date)
            }
            remember(claims, of: token)
        }
        // Agents repeat their token and their session check is cached; a phone's is made once
        // per socket, so caching it would only keep an entry per connected phone.
        if checkingSession || claims.clientID != nil {
            try await checkSession(claims.sessionID, user: claims.userID, cached: claims.clientID != nil)
        }
        if let agent = claims.agent { return .agent(agent) }
        return .phone(PhoneIdentity(userID: claims.userID, sessionID: claims.sessionID, email: claims.email,
                                    expiresAt: claims.expiresAt))
    }

    /// Remembers an agent's verified token until its `exp`. Agents repeat their token; a
    /// phone's is verified once per socket (remembering it would only keep a token per
    /// connected phone).
    private func remember(_ claims: JWTClaims, of token: String) {
        guard claims.clientID != nil else { return }
        memory.withLock { memory in
            if memory.verifiedTokens.count >= Self.maximumVerifiedTokens { memory.verifiedTokens.removeAll() }
            memory.verifiedTokens[token] = claims
        }
    }

    /// Reloads the JWKS when a token names an unknown key or its signature does not verify
    /// (`failed`, thrown when there is nothing to reload), at most once a minute, on a thread
    /// of its own (a fetch may take seconds; the actor keeps serving meanwhile).
    private func refetchJWKS(for token: String, failed: AuthError) async throws(AuthError) {
        guard jwksSource != .none, !jwksFetchInFlight, let kid = JWTVerifier.keyID(of: token),
              failed == .badSignature || !verifier.knowsKey(id: kid),
              clock.date.timeIntervalSince(lastJWKSFetch) >= Self.jwksRefetchInterval else { throw failed }
        lastJWKSFetch = clock.date
        jwksFetchInFlight = true
        defer { jwksFetchInFlight = false }
        // A JWKS that has gone away keeps the keys already read.
        guard case .success(let loaded) = await fetchVerifier() else { throw failed }
        use(loaded)
    }

    private func checkSession(_ session: UUID, user: UUID, cached: Bool) async throws(AuthError) {
        switch try await sessionState(session, user: user, cached: cached) {
        case .alive: break
        case .deviceRemoved: throw .deviceRemoved
        case .signedOut: throw .revoked
        }
    }

    private func sessionState(_ session: UUID, user: UUID, cached useCache: Bool) async throws(AuthError) -> RelayStatus.Session {
        if useCache, let cached = memory.withLock({ $0.sessions[session] }), clock.date.timeIntervalSince(cached.at) < sessionCacheTTL {
            return cached.state
        }
        // Checks of many sockets and requests go to the database together (a storm).
        guard let state = await sessionChecker.state(session: session, user: user) else { throw .unavailable }
        guard useCache else { return state }
        let at = clock.date
        memory.withLock { memory in
            if memory.sessions.count >= Self.maximumCacheEntries { memory.sessions.removeAll() }
            memory.sessions[session] = (state, at)
        }
        return state
    }
}
