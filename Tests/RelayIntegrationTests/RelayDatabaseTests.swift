import Foundation
import PGBus
import Relay
@testable import RelayCore
import Testing

/// The typed gateway over relay.* functions, as the whereabot_relay role on the real database.
@Suite struct RelayDatabaseTests {
    let instance = "tests-\(UUID().uuidString.prefix(8).lowercased())"

    @Test func instancesRegisterBeatAndReap() async throws {
        let db = TestDatabase.relay()
        try await db.registerInstance(instance)
        #expect(try await db.heartbeat(instance) == false)
        #expect(try await db.heartbeat(instance + "-gone") == true)
        let report = try await db.reap()
        #expect(report.instances >= 0 && report.deleted >= 0)
    }

    @Test func helloReturnsPendingPingsAndRefusesOtherUsersDevices() async throws {
        let admin = try await TestDatabase.admin()
        defer { Task { await admin.close() } }
        let ada = try await TestDatabase.makeUser(admin), bob = try await TestDatabase.makeUser(admin, name: "Bob")
        try await admin.query("insert into public.location_shares (owner_id, viewer_id) values ($1, $2)", [ada.user, bob.user])
        let db = TestDatabase.relay()
        try await db.registerInstance(instance)
        let request = UUID()
        let opened = try await db.openRequest(id: request, owner: ada.user, requester: bob.user, clientID: "client-1",
                                              clientName: "Claude", instance: instance, replyKey: try ReplyKey().publicKey,
                                              expiresAt: Date().addingTimeInterval(60), maxWaiting: 5)
        #expect(opened.status == .opened && opened.connections == 0)

        let device = UUID(), connection = UUID()
        let hello = try await db.deviceHello(instance: instance, connection: connection, user: ada.user, session: ada.session, device: device,
                                             name: "Ada's iPhone", platform: "ios", appVersion: "1.0", openedAt: Date())
        #expect(hello.status == .ok)
        #expect(hello.pending.map(\.id) == [request])
        #expect(hello.pending.first?.clientID == "client-1")
        #expect(hello.pending.first?.requester == Person(userID: bob.user, name: "Bob", email: bob.email))
        let stolen = try await db.deviceHello(instance: instance, connection: UUID(), user: bob.user, session: bob.session, device: device,
                                              name: "x", platform: "ios", appVersion: "1", openedAt: Date())
        #expect(stolen.status == .forbidden)
        #expect(try await db.deviceDisconnects([connection]) == 1)
        #expect(try await db.deviceDisconnects([connection]) == 0, "a socket is forgotten once")
    }

    @Test func firstAnswerWinsAndTheWaiterLearnsIt() async throws {
        let admin = try await TestDatabase.admin()
        defer { Task { await admin.close() } }
        let ada = try await TestDatabase.makeUser(admin)
        let db = TestDatabase.relay()
        try await db.registerInstance(instance)
        let device = UUID()
        _ = try await db.deviceHello(instance: instance, connection: UUID(), user: ada.user, session: ada.session, device: device,
                                     name: "Phone", platform: "android", appVersion: "1", openedAt: Date())
        let request = UUID(), key = try ReplyKey()
        _ = try await db.openRequest(id: request, owner: ada.user, requester: nil, clientID: "agent-key", clientName: nil,
                                     instance: instance, replyKey: key.publicKey, expiresAt: Date().addingTimeInterval(60), maxWaiting: 5)
        #expect(try await db.markDelivered([request]) == 1)
        #expect(try await db.replyKey(request: request, user: ada.user) == key.publicKey)
        #expect(try await db.replyKey(request: request, user: UUID()) == nil)
        let sealed = try Sealing.seal(Array("{}".utf8), to: key.publicKey, requestID: request)
        #expect(try await db.settle(id: request, user: ada.user, device: device, answer: .location(sealed: sealed),
                                    instance: instance) == .settled)
        #expect(try await db.settle(id: request, user: ada.user, device: device, answer: .denied(reason: .user),
                                    instance: instance) == .gone)
        let finished = try await db.finish(id: request, instance: instance, abandoned: false)
        #expect(finished.status == .alreadySettled && finished.delivered == true)
        #expect(finished.outcome == .location && finished.reason == nil)

        let silent = UUID()
        _ = try await db.openRequest(id: silent, owner: ada.user, requester: nil, clientID: "agent-key", clientName: nil,
                                     instance: instance, replyKey: key.publicKey, expiresAt: Date().addingTimeInterval(60), maxWaiting: 5)
        let abandoned = try await db.finish(id: silent, instance: instance, abandoned: true)
        #expect(abandoned.status == .finished && abandoned.delivered == false && abandoned.outcome == .abandoned)
    }

    @Test func theCapRefusesPastTheLimit() async throws {
        let admin = try await TestDatabase.admin()
        defer { Task { await admin.close() } }
        let ada = try await TestDatabase.makeUser(admin)
        let db = TestDatabase.relay()
        try await db.registerInstance(instance)
        var statuses: [RelayStatus.Open] = []
        for _ in 0..<3 {
            statuses.append(try await db.openRequest(id: UUID(), owner: ada.user, requester: nil, clientID: "agent-key",
                                                     clientName: nil, instance: instance, replyKey: try ReplyKey().publicKey,
                                                     expiresAt: Date().addingTimeInterval(60), maxWaiting: 2).status)
        }
        #expect(statuses == [.opened, .opened, .tooMany])
    }

    @Test func agentKeysSessionsAndClientNames() async throws {
        let admin = try await TestDatabase.admin()
        defer { Task { await admin.close() } }
        let ada = try await TestDatabase.makeUser(admin)
        let claims = try PGJSON(["sub": ada.user.uuidString.lowercased(), "role": "authenticated"])
        let key = try await admin.asUser(claims: claims) { try await $0.query("select public.create_agent_key('CI')").scalar(String.self) }
        #expect(AgentKey.looksLikeKey(key))
        let db = TestDatabase.relay()
        let owner = try #require(try await db.agentKeyOwner(keyHash: AgentKey.hash(key)))
        #expect(owner.userID == ada.user && owner.keyName == "CI" && owner.email == ada.email)
        #expect(try await db.agentKeyOwner(keyHash: AgentKey.hash("wb_" + String(repeating: "0", count: 64))) == nil)
        _ = try await admin.asUser(claims: claims) { try await $0.query("select public.revoke_agent_key($1)", [owner.keyID]) }
        #expect(try await db.agentKeyOwner(keyHash: AgentKey.hash(key)) == nil)

        #expect(try await db.sessionStates([(ada.session, ada.user), (ada.session, UUID())]) == [.alive, .signedOut])
        let client = UUID()
        try await TestDatabase.makeOAuthClients(admin, [(client, "Claude Desktop")])
        #expect(try await db.clientName(client.uuidString.lowercased()) == "Claude Desktop")
        #expect(try await db.clientName("agent-key") == nil)
    }

    /// The key hash matches PostgreSQL's own sha256 of the key.
    @Test func agentKeyHashMatchesPostgres() async throws {
        let admin = try await TestDatabase.admin()
        defer { Task { await admin.close() } }
        let key = "wb_" + String(repeating: "ab", count: 32)
        let expected = try await admin.query("select encode(sha256(convert_to($1, 'UTF8')), 'hex')", [key]).scalar(String.self)
        #expect(AgentKey.hash(key) == expected)
        #expect(!AgentKey.looksLikeKey("wb_short") && !AgentKey.looksLikeKey("eyJhbGciOi.x.y"))
    }
}
