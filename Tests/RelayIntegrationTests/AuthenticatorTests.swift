import Foundation
import Loop
import PGBus
@testable import Relay
import TestSupport
import Testing

/// Credentials end to end: JWTs with the session check, agent keys with their cache, the
/// JWKS refetch, and the split between agent and phone credentials.
@Suite struct AuthenticatorTests {
    static let secret = "super-secret-jwt-token-with-at-least-32-characters"

    /// A clock the test moves by hand: an event loop's on `LoopClock.manual`, read as an
    /// instance's parts read theirs.
    final class Clock: Sendable {
        private let loop = try! EventLoop.start(name: "test-clock", clock: .manual)
        var relay: RelayClock { RelayClock(loop: loop) }
        func advance(_ seconds: TimeInterval) async { await loop.advance(by: .nanoseconds(Int64(seconds * 1e9))) }
        deinit { loop.stop() }
    }

    func token(user: UUID, session: UUID?, clientID: String? = nil, secret: String = AuthenticatorTests.secret) -> String {
        var claims = TestToken.claims(user: user, clientID: clientID)
        claims["session_id"] = session?.uuidString.lowercased()
        return TestToken.make(header: ["alg": "HS256", "typ": "JWT"], claims: claims) { TestToken.hmac(Array(secret.utf8), $0) }
    }

    /// An authenticator of HS256 tokens signed with `secret`, on the test database, with
    /// `clock`'s time (the system's without one).
    func authenticator(clock: Clock? = nil, sessionCacheTTL: TimeInterval = Authenticator.defaultSessionCacheTTL) throws
        -> Authenticator {
        try Authenticator(hmacSecret: Self.secret, jwks: .none, issuer: nil, database: TestDatabase.relay(),
                          sessionCacheTTL: sessionCacheTTL, clock: clock?.relay ?? .system)
    }

    @Test func sessionTokensArePhonesAndClientTokensAreAgents() async throws {
        let admin = try await TestDatabase.admin()
        defer { Task { await admin.close() } }
        let ada = try await TestDatabase.makeUser(admin)
        let auth = try authenticator()
        let phone = try await auth.phone("Bearer " + token(user: ada.user, session: ada.session))
        #expect(phone.userID == ada.user && phone.sessionID == ada.session)
        let agent = try await auth.agent("bearer " + token(user: ada.user, session: ada.session, clientID: "client-7"))
        #expect(agent.userID == ada.user && agent.clientID == "client-7" && agent.keyID == nil)
        await #expect(throws: AuthError.wrongCredentialKind) { try await auth.agent("Bearer " + token(user: ada.user, session: ada.session)) }
        await #expect(throws: AuthError.wrongCredentialKind) {
            try await auth.phone("Bearer " + token(user: ada.user, session: ada.session, clientID: "client-7"))
        }
        for header in [nil, "", "Bearer ", "Basic dXNlcjpwYXNz", "Token abc"] {
            await #expect(throws: AuthError.missing) { try await auth.authenticate(header) }
        }
    }

    /// An address past its failure budget gets 429 for a credential that would cost a
    /// lookup, but a request without one still gets 401 (`missing`): it guesses nothing, and
    /// it is how a client discovers where to sign in.
    @Test func noCredentialIsNeverRateLimited() async throws {
        let auth = try authenticator()
        for _ in 0..<100 { _ = try? await auth.authenticate("Bearer junk", client: "192.0.2.7") }
        await #expect(throws: AuthError.rateLimited) { try await auth.authenticate("Bearer junk", client: "192.0.2.7") }
        await #expect(throws: AuthError.missing) { try await auth.authenticate(nil, client: "192.0.2.7") }
        await #expect(throws: AuthError.missing) { try await auth.authenticate("Basic dXNlcjpwYXNz", client: "192.0.2.7") }
    }

    /// Verified tokens are remembered (no second signature check) only until their `exp`
    /// — a remembered token expires like any other — and at most `maximumVerifiedTokens`.
    @Test func verifiedTokensAreBoundedAndExpire() async throws {
        let admin = try await TestDatabase.admin()
        defer { Task { await admin.close() } }
        let ada = try await TestDatabase.makeUser(admin)
        let clock = Clock()
        let auth = try authenticator(clock: clock, sessionCacheTTL: 3_600)
        let first = "Bearer " + token(user: ada.user, session: ada.session, clientID: "client-0")
        _ = try await auth.agent(first)
        #expect(await auth.verifiedTokenCount == 1)
        for index in 1...Authenticator.maximumVerifiedTokens {
            _ = try await auth.agent("Bearer " + token(user: ada.user, session: ada.session, clientID: "client-\(index)"))
            #expect(await auth.verifiedTokenCount <= Authenticator.maximumVerifiedTokens)
        }
        _ = try await auth.agent(first)  // still good while unexpired
        // A phone's token is verified once per socket and not remembered.
        let count = await auth.verifiedTokenCount
        _ = try await auth.phone("Bearer " + token(user: ada.user, session: ada.session))
        #expect(await auth.verifiedTokenCount == count)
        await clock.advance(3_600 + JWTVerifier.defaultLeeway + 1)
        await #expect(throws: AuthError.expired) { try await auth.agent(first) }
    }

    /// Phones connecting together (a reconnect storm) have their sessions checked in
    /// batches; each still gets its own answer.
    @Test func sessionChecksMadeTogetherEachGetTheirOwnAnswer() async throws {
        let admin = try await TestDatabase.admin()
        defer { Task { await admin.close() } }
        var users: [(user: UUID, session: UUID, email: String)] = []
        for _ in 0..<60 { users.append(try await TestDatabase.makeUser(admin)) }
        let signedOut = users.enumerated().filter { $0.offset % 3 == 0 }.map(\.element.session)
        try await admin.query("delete from auth.sessions where id = any($1)", [signedOut])
        let auth = try authenticator()
        let outcomes = await withTaskGroup(of: (UUID, Bool).self) { group in
            for user in users {
                let header = "Bearer " + token(user: user.user, session: user.session)
                group.addTask { (user.session, (try? await auth.phone(header)) != nil) }
            }
            return await group.reduce(into: [UUID: Bool]()) { $0[$1.0] = $1.1 }
        }
        #expect(outcomes.count == 60)
        for user in users { #expect(outcomes[user.session] == !signedOut.contains(user.session)) }
    }

    /// A signed-out session (its auth.sessions row deleted) is refused to an agent once the
    /// cache expires, and to a phone at once: a phone's session is checked once per socket,
    /// so no socket leaves a cached session behind.
    @Test func signedOutSessionIsRevoked() async throws {
        let admin = try await TestDatabase.admin()
        defer { Task { await admin.close() } }
        let ada = try await TestDatabase.makeUser(admin)
        let clock = Clock()
        let auth = try authenticator(clock: clock)
        let header = "Bearer " + token(user: ada.user, session: ada.session)
        let agent = "Bearer " + token(user: ada.user, session: ada.session, clientID: "client-7")
        _ = try await auth.phone(header)
        _ = try await auth.agent(agent)
        try await admin.query("delete from auth.sessions where id = $1", [ada.session])
        _ = try await auth.agent(agent)  // still cached
        await #expect(throws: AuthError.revoked) { try await auth.phone(header) }
        await clock.advance(Authenticator.defaultSessionCacheTTL + 1)
        await #expect(throws: AuthError.revoked) { try await auth.agent(agent) }
        await #expect(throws: AuthError.revoked) {
            try await auth.phone("Bearer " + token(user: ada.user, session: UUID()))
        }
    }

    /// Agent keys resolve to their owner; a revoked key stops working as soon as the
    /// whereabot_key notification drops it, without waiting for the cache.
    @Test func agentKeysAndTheirRevocation() async throws {
        let admin = try await TestDatabase.admin()
        defer { Task { await admin.close() } }
        let ada = try await TestDatabase.makeUser(admin)
        let claims = try PGJSON(["sub": ada.user.uuidString.lowercased(), "role": "authenticated"])
        let key = try await admin.asUser(claims: claims) { try await $0.query("select public.create_agent_key('Nightly CI')").scalar(String.self) }
        let auth = try authenticator()
        let agent = try await auth.agent("Bearer " + key)
        #expect(agent.userID == ada.user && agent.clientID == "agent-key" && agent.keyName == "Nightly CI" && agent.email == ada.email)
        let keyID = try #require(agent.keyID)
        _ = try await admin.asUser(claims: claims) { try await $0.query("select public.revoke_agent_key($1)", [keyID]) }
        _ = try await auth.agent("Bearer " + key)  // cached until the notification arrives
        await auth.dropKey(id: keyID)
        await #expect(throws: AuthError.unknownAgentKey) { try await auth.agent("Bearer " + key) }
        await #expect(throws: AuthError.unknownAgentKey) { try await auth.agent("Bearer wb_" + String(repeating: "1", count: 64)) }
    }

    /// `rememberedAgent` (no hop to the actor) lets in what the actor would let in from the
    /// same memory, and only that: an agent token verified before, unexpired, whose session
    /// was seen alive within the session cache's time; an agent key within its cache time.
    /// Anything not remembered, stale, forgotten, refused or a phone's is nil.
    @Test func rememberedAgentsAreOnlyFreshOnes() async throws {
        let admin = try await TestDatabase.admin()
        defer { Task { await admin.close() } }
        let ada = try await TestDatabase.makeUser(admin)
        let clock = Clock()
        let auth = try authenticator(clock: clock)
        let agent = "Bearer " + token(user: ada.user, session: ada.session, clientID: "client-7")
        let phone = "Bearer " + token(user: ada.user, session: ada.session)
        #expect(auth.rememberedAgent(agent) == nil, "never seen")
        let identity = try await auth.agent(agent)
        #expect(auth.rememberedAgent(agent) == identity)
        #expect(auth.rememberedAgent("bearer  " + agent.dropFirst(7) + " ") == identity, "read as the actor reads a header")
        _ = try await auth.phone(phone)
        #expect(auth.rememberedAgent(phone) == nil, "a phone's token is not an agent's")
        for header in [nil, "", "Bearer ", "Basic dXNlcjpwYXNz", agent + "x"] {
            #expect(auth.rememberedAgent(header) == nil)
        }
        await clock.advance(Authenticator.defaultSessionCacheTTL + 1)
        #expect(auth.rememberedAgent(agent) == nil, "the session's check is stale")
        _ = try await auth.agent(agent)
        #expect(auth.rememberedAgent(agent) == identity, "checked again")
        await auth.forgetSession(ada.session)
        #expect(auth.rememberedAgent(agent) == nil, "a revoke notification forgot the session")
        try await admin.query("delete from auth.sessions where id = $1", [ada.session])
        await #expect(throws: AuthError.revoked) { try await auth.agent(agent) }
        #expect(auth.rememberedAgent(agent) == nil, "a signed-out session is remembered, and not let in")

        // A token's own expiry (the tests' tokens live an hour), with sessions trusted longer.
        let bob = try await TestDatabase.makeUser(admin)
        let patient = try authenticator(clock: clock, sessionCacheTTL: 86_400)
        let bobs = "Bearer " + token(user: bob.user, session: bob.session, clientID: "client-8")
        _ = try await patient.agent(bobs)
        #expect(patient.rememberedAgent(bobs) != nil)
        await clock.advance(3_600 + JWTVerifier.defaultLeeway + 1)
        #expect(patient.rememberedAgent(bobs) == nil, "an expired token")
        await #expect(throws: AuthError.expired) { try await patient.agent(bobs) }

        let claims = try PGJSON(["sub": ada.user.uuidString.lowercased(), "role": "authenticated"])
        let key = try await admin.asUser(claims: claims) { try await $0.query("select public.create_agent_key('Nightly CI')").scalar(String.self) }
        #expect(auth.rememberedAgent("Bearer " + key) == nil)
        let keyAgent = try await auth.agent("Bearer " + key)
        #expect(auth.rememberedAgent("Bearer " + key) == keyAgent)
        await auth.dropKey(id: try #require(keyAgent.keyID))
        #expect(auth.rememberedAgent("Bearer " + key) == nil, "a revoked key, dropped")
        await #expect(throws: AuthError.unknownAgentKey) { try await auth.agent("Bearer wb_" + String(repeating: "1", count: 64)) }
        #expect(auth.rememberedAgent("Bearer wb_" + String(repeating: "1", count: 64)) == nil, "no such key, remembered as none")
        _ = try await auth.agent("Bearer " + key)
        await clock.advance(Authenticator.defaultKeyCacheTTL + 1)
        #expect(auth.rememberedAgent("Bearer " + key) == nil, "past the key cache's time")
    }

    /// A token signed by a key the relay has not seen makes it reload the JWKS, at most
    /// once a minute.
    @Test func unknownKeyIDRefetchesTheJWKSAtMostOnceAMinute() async throws {
        let admin = try await TestDatabase.admin()
        defer { Task { await admin.close() } }
        let ada = try await TestDatabase.makeUser(admin)
        let old = TestKey(.p256, kid: "old"), new = TestKey(.p256, kid: "new"), newer = TestKey(.rsa, kid: "newer")
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("jwks-\(UUID()).json")
        defer { try? FileManager.default.removeItem(at: file) }
        func publish(_ keys: [TestKey]) throws {
            try JSONSerialization.data(withJSONObject: ["keys": keys.map(\.jwk)]).write(to: file)
        }
        func signed(_ key: TestKey) -> String {
            var claims = TestToken.claims(user: ada.user)
            claims["session_id"] = ada.session.uuidString.lowercased()
            return "Bearer " + TestToken.make(header: ["alg": key.kind == .rsa ? "RS256" : "ES256", "kid": key.kid],
                                              claims: claims, sign: key.sign)
        }
        try publish([old])
        let clock = Clock()
        let auth = try Authenticator(hmacSecret: nil, jwks: .file(file.path), issuer: nil, database: TestDatabase.relay(),
                                     clock: clock.relay)
        _ = try await auth.phone(signed(old))
        try publish([old, new])
        await #expect(throws: AuthError.unknownKey) { try await auth.phone(signed(new)) }  // fetched less than a minute ago
        await clock.advance(61)
        _ = try await auth.phone(signed(new))
        try publish([old, new, newer])
        await #expect(throws: AuthError.unknownKey) { try await auth.phone(signed(newer)) }
        await clock.advance(61)
        _ = try await auth.phone(signed(newer))
    }

    /// The JWKS can come from a URL (here file://, through the same libcurl path).
    @Test func jwksFromAURL() throws {
        let key = TestKey(.p256, kid: "url-key")
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("jwks-\(UUID()).json")
        defer { try? FileManager.default.removeItem(at: file) }
        try JSONSerialization.data(withJSONObject: ["keys": [key.jwk]]).write(to: file)
        let data = try #require(try JWKSSource.url("file://" + file.path).load().data)
        #expect(try JWTVerifier(jwks: data).knowsKey(id: "url-key"))
        #expect(throws: JWKSSource.LoadError(source: "file:///nonexistent/jwks.json", reason: "cannot read the file")) {
            try JWKSSource.url("file:///nonexistent/jwks.json").load()
        }
    }

    /// A JWKS URL that does not answer says why in words for /readyz, naming the URL without
    /// its userinfo or query; a file that cannot be read is a setting to fix.
    @Test func jwksFailuresSayWhy() throws {
        let refused = JWKSSource.url("http://user:secret@127.0.0.1:1/auth/v1/.well-known/jwks.json?apikey=k")
        #expect(throws: JWKSSource.LoadError(source: "http://127.0.0.1:1/auth/v1/.well-known/jwks.json", reason: "connection refused")) {
            try refused.load()
        }
        #expect(JWKSSource.LoadError(source: "https://x/jwks.json", reason: "timeout").description == "signing keys https://x/jwks.json: timeout")
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("jwks-\(UUID()).json")
        defer { try? FileManager.default.removeItem(at: file) }
        try Data("not json".utf8).write(to: file)
        #expect(throws: JWKSSource.LoadError(source: file.path, reason: "not a JWKS document")) {
            try JWKSSource.file(file.path).verifier(hmacSecret: nil, issuer: nil, audience: nil)
        }
        #expect(throws: JWKSSource.LoadError.self) {
            try Authenticator(hmacSecret: nil, jwks: .file("/nonexistent/jwks.json"), issuer: nil, database: TestDatabase.relay())
        }
    }

    /// A relay started while its JWKS URL is down checks nothing it cannot check: a token
    /// signed with a key is "unavailable" (503, retry), not refused (401), until the keys
    /// are read; then it verifies. HS256 tokens work all along.
    @Test func signingKeysThatArriveLater() async throws {
        let admin = try await TestDatabase.admin()
        defer { Task { await admin.close() } }
        let ada = try await TestDatabase.makeUser(admin)
        let key = TestKey(.p256, kid: "late-key")
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("jwks-\(UUID()).json")
        defer { try? FileManager.default.removeItem(at: file) }
        var claims = TestToken.claims(user: ada.user)
        claims["session_id"] = ada.session.uuidString.lowercased()
        let signed = "Bearer " + TestToken.make(header: ["alg": "ES256", "kid": key.kid], claims: claims, sign: key.sign)
        let auth = try Authenticator(hmacSecret: Self.secret, jwks: .url("file://" + file.path), issuer: nil,
                                     database: TestDatabase.relay())
        #expect(await auth.needsKeys)
        await #expect(throws: AuthError.unavailable) { try await auth.phone(signed) }
        _ = try await auth.phone("Bearer " + token(user: ada.user, session: ada.session))
        #expect(await auth.loadKeys()?.reason == "cannot read the file")
        try JSONSerialization.data(withJSONObject: ["keys": [key.jwk]]).write(to: file)
        #expect(await auth.loadKeys() == nil)
        #expect(await !auth.needsKeys)
        #expect(try await auth.phone(signed).userID == ada.user)
        try FileManager.default.removeItem(at: file)  // the JWKS goes away: the keys read keep working
        #expect(try await auth.phone(signed).userID == ada.user)
    }

    /// The scheduled refresh reads the JWKS again: a key withdrawn from it is refused from
    /// then on, even for an agent whose token was verified (and remembered) before, while the
    /// key that stays keeps working; the next refresh is due after the floor (a file has no
    /// max-age, so the ceiling) within the configured bounds.
    @Test func aWithdrawnKeyIsRefusedAfterTheScheduledRefresh() async throws {
        let admin = try await TestDatabase.admin()
        defer { Task { await admin.close() } }
        let ada = try await TestDatabase.makeUser(admin)
        let leaked = TestKey(.p256, kid: "leaked"), current = TestKey(.p256, kid: "current")
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("jwks-\(UUID()).json")
        defer { try? FileManager.default.removeItem(at: file) }
        try JSONSerialization.data(withJSONObject: ["keys": [leaked.jwk, current.jwk]]).write(to: file)
        var claims = TestToken.claims(user: ada.user)
        claims["session_id"] = ada.session.uuidString.lowercased()
        claims["client_id"] = "refresh-test"
        func signed(_ key: TestKey) -> String {
            "Bearer " + TestToken.make(header: ["alg": "ES256", "kid": key.kid], claims: claims, sign: key.sign)
        }
        let auth = try Authenticator(hmacSecret: nil, jwks: .url("file://" + file.path), issuer: nil,
                                     database: TestDatabase.relay(), jwksRefresh: 5...60)
        #expect(await auth.loadKeys() == nil)
        let leakedToken = signed(leaked)  // one token (ES256 signatures differ each time)
        #expect(try await auth.agent(leakedToken).userID == ada.user)
        #expect(auth.rememberedAgent(leakedToken) != nil, "its verification is remembered")
        try JSONSerialization.data(withJSONObject: ["keys": [current.jwk]]).write(to: file)
        #expect(await auth.refreshKeys() == 60, "no max-age: the ceiling")
        #expect(auth.rememberedAgent(leakedToken) == nil, "what was verified under the old keys is forgotten")
        await #expect(throws: AuthError.self) { try await auth.agent(leakedToken) }
        #expect(try await auth.agent(signed(current)).userID == ada.user)
        try FileManager.default.removeItem(at: file)
        #expect(await auth.refreshKeys() == 5, "a failed read is tried again after the floor")
        #expect(try await auth.agent(signed(current)).userID == ada.user, "and the keys read keep working")
    }

    /// A LISTEN reconnect makes the authenticator forget every remembered agent key and
    /// session: nothing revoked during the gap is let in from memory.
    @Test func aListenerGapForgetsRememberedKeysAndSessions() async throws {
        let admin = try await TestDatabase.admin()
        defer { Task { await admin.close() } }
        let ada = try await TestDatabase.makeUser(admin)
        let auth = try authenticator()
        let agent = "Bearer " + token(user: ada.user, session: ada.session, clientID: "gap-test")
        _ = try await auth.agent(agent)
        #expect(auth.rememberedAgent(agent) != nil)
        await auth.forgetRevocable()
        #expect(auth.rememberedAgent(agent) == nil, "asked of the database again")
    }

    /// A database that cannot be reached is "unavailable" (503), not a bad credential (401).
    @Test func unreachableDatabaseIsUnavailable() async throws {
        var configuration = PGConfiguration("postgresql://whereabot_relay:x@127.0.0.1:1/none")
        configuration.connectTimeoutSeconds = 1
        let auth = try Authenticator(hmacSecret: Self.secret, jwks: .none, issuer: nil,
                                     database: RelayDatabase(pool: PGPool(configuration: configuration, size: 1)))
        await #expect(throws: AuthError.unavailable) { try await auth.agent("Bearer wb_" + String(repeating: "2", count: 64)) }
        await #expect(throws: AuthError.unavailable) { try await auth.phone("Bearer " + token(user: UUID(), session: UUID())) }
    }
}
