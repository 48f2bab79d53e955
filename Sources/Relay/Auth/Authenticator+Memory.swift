import Foundation
import RelayCore
import Synchronization

/// What the authenticator remembers, behind a lock rather than the actor: an agent whose
/// token, session and key are all remembered and fresh is let in by `rememberedAgent(_:)`
/// on the caller's thread, without a hop to the actor and back (two thread hops per call on
/// a loaded instance, and every agent request asks twice: when it comes in and before its
/// answer is delivered). Everything else — a first sight, an expiry, a refusal and its count
/// against the address — goes through the actor, which writes what it learns here.
extension Authenticator {
    /// Sessions, agent keys and agents' tokens, each bounded (emptied when full).
    struct Memory: Sendable {
        /// Session states as last read, with when (trusted for `sessionCacheTTL`).
        var sessions: [UUID: (state: RelayStatus.Session, at: Date)] = [:]
        /// Agent keys by their hash: the owner, or nil for "no such key", with when.
        var keys: [String: (owner: RelayDatabase.AgentKeyOwner?, at: Date)] = [:]
        /// Agents' tokens whose signature and claims verified, until their `exp` (past it a
        /// token is verified again, with the leeway): an agent reusing its token costs no
        /// signature check. Emptied when the JWKS changes.
        var verifiedTokens: [String: JWTClaims] = [:]
    }

    /// The agent behind `authorization` when all of it is remembered and still fresh — an
    /// agent key looked up within `keyCacheTTL`, or an agent's token verified before and
    /// not expired whose session was seen alive within `sessionCacheTTL` — else nil, and the
    /// caller asks `agent(_:client:)`, which decides every other case. It lets in exactly
    /// what `agent(_:client:)` would let in from the same memory, and refuses nothing.
    public nonisolated func rememberedAgent(_ authorization: String?) -> AgentIdentity? {
        guard let token = Self.bearerToken(authorization) else { return nil }
        let now = clock.date, keyCacheTTL = self.keyCacheTTL, sessionCacheTTL = self.sessionCacheTTL
        if AgentKey.looksLikeKey(token) {
            let hash = AgentKey.hash(token)
            guard let cached = memory.withLock({ $0.keys[hash] }), let owner = cached.owner,
                  now.timeIntervalSince(cached.at) < keyCacheTTL else { return nil }
            return owner.agent
        }
        return memory.withLock { memory -> AgentIdentity? in
            guard let claims = memory.verifiedTokens[token], now < claims.expiresAt, let agent = claims.agent,
                  let session = memory.sessions[claims.sessionID], case .alive = session.state,
                  now.timeIntervalSince(session.at) < sessionCacheTTL else { return nil }
            return agent
        }
    }
}

extension JWTClaims {
    /// The agent these claims name (a token with a client id); nil for a phone's.
    var agent: AgentIdentity? {
        clientID.map { AgentIdentity(userID: userID, clientID: $0, keyID: nil, keyName: nil, email: email) }
    }
}

extension RelayDatabase.AgentKeyOwner {
    /// The agent this key's owner is, as agent keys present it.
    var agent: AgentIdentity {
        AgentIdentity(userID: userID, clientID: AgentIdentity.agentKeyClientID, keyID: keyID, keyName: keyName, email: email)
    }
}
