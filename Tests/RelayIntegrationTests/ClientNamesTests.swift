import Foundation
import PGBus
@testable import Relay
@testable import RelayCore
import Testing

/// Agent names for pings are looked up once per lifetime, not on every locate.
@Suite struct ClientNamesTests {
    @Test func aNameIsReusedWithinItsLifetime() async throws {
        let admin = try await TestDatabase.admin()
        defer { Task { await admin.close() } }
        let id = UUID(), client = id.uuidString.lowercased()
        try await TestDatabase.makeOAuthClients(admin, [(id, "Claude Desktop")])
        let names = ClientNames(database: TestDatabase.relay(), lifetime: .seconds(60))
        #expect(await names.name(of: client) == "Claude Desktop")
        try await admin.query("update auth.oauth_clients set client_name = 'Claude' where id = $1::uuid", [client])
        #expect(await names.name(of: client) == "Claude Desktop", "within its lifetime the name is not looked up again")
        #expect(await names.name(of: "agent-key") == nil)
    }

    @Test func aNamePastItsLifetimeIsLookedUpAgain() async throws {
        let admin = try await TestDatabase.admin()
        defer { Task { await admin.close() } }
        let id = UUID(), client = id.uuidString.lowercased()
        try await TestDatabase.makeOAuthClients(admin, [(id, "Claude Desktop")])
        let names = ClientNames(database: TestDatabase.relay(), lifetime: .zero)
        #expect(await names.name(of: client) == "Claude Desktop")
        try await admin.query("update auth.oauth_clients set client_name = 'Claude' where id = $1::uuid", [client])
        #expect(await names.name(of: client) == "Claude", "the rename shows once the lifetime has passed")
    }

    @Test func theOldestNameMakesRoomAtCapacity() async throws {
        let admin = try await TestDatabase.admin()
        defer { Task { await admin.close() } }
        let ids = (UUID(), UUID()), first = ids.0.uuidString.lowercased(), second = ids.1.uuidString.lowercased()
        try await TestDatabase.makeOAuthClients(admin, [(ids.0, "One"), (ids.1, "Two")])
        let names = ClientNames(database: TestDatabase.relay(), capacity: 1)
        #expect(await names.name(of: first) == "One")
        #expect(await names.name(of: second) == "Two")
        try await admin.query("update auth.oauth_clients set client_name = 'Uno' where id = $1::uuid", [first])
        #expect(await names.name(of: first) == "Uno", "the first name was evicted, so it is looked up again")
    }
}
