import Foundation
import PGBus
import Relay
@testable import RelayCore

/// The real test database that `make test` prepares, as the relay's role and as admin.
enum TestDatabase {
    static var relayURL: String {
        ProcessInfo.processInfo.environment["WHEREABOT_TEST_RELAY_URL"]
            ?? "postgresql://whereabot_relay:whereabot-relay-dev@127.0.0.1:54322/whereabot_test"
    }
    static var adminURL: String {
        ProcessInfo.processInfo.environment["WHEREABOT_TEST_ADMIN_URL"]
            ?? "postgresql://supabase_admin:postgres@127.0.0.1:54322/whereabot_test"
    }

    static func relay() -> RelayDatabase {
        RelayDatabase(pool: PGPool(configuration: PGConfiguration(relayURL, applicationName: "relay-tests"), size: 2))
    }

    static func admin() async throws -> PGConnection {
        try await PGConnection.connect(PGConfiguration(adminURL, applicationName: "relay-tests-admin"))
    }

    /// Creates a user with a session; returns (user id, session id).
    static func makeUser(_ admin: PGConnection, name: String = "Test User") async throws -> (user: UUID, session: UUID, email: String) {
        let user = UUID(), session = UUID()
        let email = "\(user.uuidString.prefix(8).lowercased())@test.example"
        try await admin.query("""
            insert into auth.users (id, aud, role, email, raw_user_meta_data, created_at, updated_at)
            values ($1, 'authenticated', 'authenticated', $2, jsonb_build_object('full_name', $3::text), now(), now())
            """, [user, email, name])
        try await admin.query("insert into auth.sessions (id, user_id, created_at) values ($1, $2, now())", [session, user])
        return (user, session, email)
    }

    /// Registers OAuth clients as Supabase Auth does (a public client of dynamic
    /// registration): every column real Supabase requires, which has no default there.
    static func makeOAuthClients(_ admin: PGConnection, _ clients: [(id: UUID, name: String)]) async throws {
        for client in clients {
            try await admin.query("""
                insert into auth.oauth_clients (id, client_name, registration_type, client_type, redirect_uris, grant_types,
                                                token_endpoint_auth_method)
                values ($1, $2, 'dynamic', 'public', 'http://127.0.0.1:33418/callback', 'authorization_code,refresh_token', 'none')
                """, [client.id, client.name])
        }
    }
}

extension RelayDatabase {
    /// One socket's hello in tests (`deviceHellos` with one element): its status and the
    /// pings waiting for its user.
    func deviceHello(instance: String, connection: UUID, user: UUID, session: UUID, device: UUID, name: String,
                     platform: String, appVersion: String, openedAt: Date) async throws -> (status: RelayStatus.Hello, pending: [LocateMessage]) {
        let batch = try await deviceHellos(instance: instance, [SocketHello(
            connection: connection, user: user, session: session, device: device, name: name, platform: platform,
            appVersion: appVersion, openedAt: openedAt)])
        guard let status = batch.statuses[connection] else { throw PGError(.decoding, detail: "relay.device_hellos returned no status for the socket") }
        return (status, batch.pending.map(\.ping))
    }
}
