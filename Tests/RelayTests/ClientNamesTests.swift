import Foundation
import PGBus
@testable import Relay
import Testing

/// Agent names for pings are looked up once per lifetime, not on every locate.
@Suite struct ClientNamesTests {
    @Test func aNameIsReusedWithinItsLifetime() async throws {
        let admin = try await TestDatabase.admin()
        defer { Task { await admin.close() } }
        let client = UUID().uuidString.lowercased()
        try await admin.query("insert into auth.oauth_clients (id, client_name) values ($1::uuid, 'Claude Desktop')", [client])
        let names = ClientNames(database: TestDatabase.relay(), lifetime: .seconds(60))
        #expect(await names.name(of: client) == "Claude Desktop")
        try await admin.query("update auth.oauth_clients set client_name = 'Claude' where id = $1::uuid", [client])
        #expect(await names.name(of: client) == "Claude Desktop", "within its lifetime the name is not looked up again")
        #expect(await names.name(of: "agent-key") == nil)
    }

    @Test func aNamePastItsLifetimeIsLookedUpAgain() async throws {
        let admin = try await TestDatabase.admin()
        defer { Task { await admin.close() } }
        let client = UUID().uuidString.lowercased()
        try await admin.query("insert into auth.oauth_clients (id, client_name) values ($1::uuid, 'Claude Desktop')", [client])
        let names = ClientNames(database: TestDatabase.relay(), lifetime: .zero)
        #expect(await names.name(of: client) == "Claude Desktop")
        try await admin.query("update auth.oauth_clients set client_name = 'Claude' where id = $1::uuid", [client])
        #expect(await names.name(of: client) == "Claude", "the rename shows once the lifetime has passed")
    }

    @Test func theOldestNameMakesRoomAtCapacity() async throws {
        let admin = try await TestDatabase.admin()
        defer { Task { await admin.close() } }
        let first = UUID().uuidString.lowercased(), second = UUID().uuidString.lowercased()
        try await admin.query("insert into auth.oauth_clients (id, client_name) values ($1::uuid, 'One'), ($2::uuid, 'Two')", [first, second])
        let names = ClientNames(database: TestDatabase.relay(), capacity: 1)
        #expect(await names.name(of: first) == "One")
        #expect(await names.name(of: second) == "Two")
        try await admin.query("update auth.oauth_clients set client_name = 'Uno' where id = $1::uuid", [first])
        #expect(await names.name(of: first) == "Uno", "the first name was evicted, so it is looked up again")
    }
}
