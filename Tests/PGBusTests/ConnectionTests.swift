import Foundation
import PGBus
import Testing
import TestSupport

/// A single connection: errors with stable codes, cancellation, transactions, NOTIFY limits.
@Suite struct ConnectionTests {
    /// SQLSTATEs come through as codes, and descriptions hold neither SQL nor values.
    @Test func sqlStatesAreMappedAndDescriptionsLeakNothing() async throws {
        let connection = try await TestDatabase.connect()
        defer { Task { await connection.close() } }
        let table = "pgbus_unique_\(UUID().uuidString.prefix(8).lowercased())"
        try await connection.query("create temp table \(table) (secret text primary key)")
        try await connection.query("insert into \(table) values ($1)", ["hunter2"])
        let duplicate = await #expect(throws: PGError.self) {
            try await connection.query("insert into \(table) values ($1)", ["hunter2"])
        }
        #expect(duplicate?.isUniqueViolation == true)
        #expect(duplicate?.sqlState == "23505")
        #expect(duplicate.map { !"\($0)".contains("hunter2") && !"\($0)".contains(table) } == true)
        #expect(duplicate?.debugDescription.contains("duplicate key") == true)

        try await connection.query("create role pgbus_nobody_\(table.suffix(8)) nologin")
        let denied = await #expect(throws: PGError.self) {
            try await connection.withTransaction { c in
                try await c.query("set local role pgbus_nobody_\(table.suffix(8))")
                try await c.query("select * from auth.users")
            }
        }
        #expect(denied?.isInsufficientPrivilege == true)
        try await connection.query("drop role pgbus_nobody_\(table.suffix(8))")

        let timeout = await #expect(throws: PGError.self) {
            try await connection.withTransaction { c in
                try await c.query("set local statement_timeout = 50")
                try await c.query("select pg_sleep(5)")
            }
        }
        #expect(timeout?.isQueryCanceled == true)
        #expect(try await connection.query("select 1").scalar(Int.self) == 1)
    }

    /// Cancelling the task of `pg_sleep(30)` cancels the query on the server: the same
    /// connection answers the next query long before the sleep could have ended.
    @Test func cancellingATaskCancelsTheQueryOnTheServer() async throws {
        let connection = try await TestDatabase.connect()
        defer { Task { await connection.close() } }
        let task = Task { try await connection.query("select pg_sleep(30)") }
        let observer = try await TestDatabase.connect()
        defer { Task { await observer.close() } }
        try await eventually("pg_sleep(30) runs") {
            try await observer.query("select count(*)::int from pg_stat_activity where query = 'select pg_sleep(30)' and state = 'active'")
                .scalar(Int.self) == 1
        }
        let started = ContinuousClock.now
        task.cancel()
        let result = await task.result
        #expect(throws: CancellationError.self) { try result.get() }
        #expect(connection.isUsable)
        #expect(try await connection.query("select 41 + 1").scalar(Int.self) == 42)
        // Had the server kept sleeping, that answer would have waited for the 30 s. (A bound
        // of 1 s timed the test's own scheduling too, and failed under load at 1.24 s.)
        #expect(ContinuousClock.now - started < .seconds(15))
    }

    /// A failed transaction rolls back everything in it; a committed one keeps it.
    @Test func transactionsCommitOrRollBack() async throws {
        let connection = try await TestDatabase.connect()
        defer { Task { await connection.close() } }
        try await connection.query("create temp table pgbus_tx (n int)")
        await #expect(throws: PGError.self) {
            try await connection.withTransaction { c in
                try await c.query("insert into pgbus_tx values (1)")
                try await c.query("select 1 / 0")
            }
        }
        try await connection.withTransaction { c in try await c.query("insert into pgbus_tx values (2)") }
        #expect(try await connection.query("select array_agg(n) from pgbus_tx").scalar([Int].self) == [2])
    }

    /// A transaction whose task is cancelled is rolled back all the same: the connection is
    /// clean for the next statement (not left in an aborted transaction).
    @Test func aCancelledTransactionIsRolledBack() async throws {
        let connection = try await TestDatabase.connect()
        defer { Task { await connection.close() } }
        try await connection.query("create temp table pgbus_cancelled_tx (n int)")
        let task = Task {
            try await connection.withTransaction { c in
                try await c.query("insert into pgbus_cancelled_tx values (1)")
                try await c.query("select pg_sleep(29)")
            }
        }
        let observer = try await TestDatabase.connect()
        defer { Task { await observer.close() } }
        try await eventually("pg_sleep(29) runs, after the insert") {
            try await observer.query("select count(*)::int from pg_stat_activity where query = 'select pg_sleep(29)' and state = 'active'")
                .scalar(Int.self) == 1
        }
        task.cancel()
        await #expect(throws: CancellationError.self) { try await task.value }
        #expect(try await connection.query("select count(*)::int from pgbus_cancelled_tx").scalar(Int.self) == 0)
    }

    /// asUser runs statements as PostgREST would: role authenticated and the JWT claims set.
    @Test func asUserSetsRoleAndClaimsForTheTransactionOnly() async throws {
        let connection = try await TestDatabase.connect()
        defer { Task { await connection.close() } }
        let user = UUID()
        let claims = try PGJSON(["sub": user.uuidString.lowercased(), "role": "authenticated"])
        let (role, uid) = try await connection.asUser(claims: claims) { c in
            let row = try #require(try await c.query("select current_user::text, auth.uid()").first)
            return (try row.decode(0, as: String.self), try row.decode(1, as: UUID.self))
        }
        #expect(role == "authenticated")
        #expect(uid == user)
        #expect(try await connection.query("select current_user::text").scalar(String.self) == "supabase_admin")
    }

    /// NOTIFY payloads of 8000 bytes or more are refused with a typed error; 7999 pass.
    @Test func notifyRefusesOversizedPayloads() async throws {
        let connection = try await TestDatabase.connect()
        defer { Task { await connection.close() } }
        try await connection.notify(channel: "pgbus_limit", payload: String(repeating: "x", count: 7999))
        let error = await #expect(throws: PGError.self) {
            try await connection.notify(channel: "pgbus_limit", payload: String(repeating: "é", count: 4000))
        }
        #expect(error?.code == .payloadTooLarge)
    }

    /// A connection whose backend is terminated reports connectionClosed and is not usable.
    @Test func terminatedBackendMakesTheConnectionUnusable() async throws {
        let victim = try await TestDatabase.connect()
        let killer = try await TestDatabase.connect()
        defer { Task { await victim.close(); await killer.close() } }
        let pid = try await victim.query("select pg_backend_pid()").scalar(Int32.self)
        try await killer.query("select pg_terminate_backend($1)", [pid])
        try await eventually("the backend is gone") {
            try await killer.query("select count(*)::int from pg_stat_activity where pid = $1", [pid]).scalar(Int.self) == 0
        }
        let error = await #expect(throws: PGError.self) { try await victim.query("select 1") }
        #expect(error?.code == .connectionClosed || error?.sqlState == SQLState.adminShutdown)
        #expect(!victim.isUsable)
    }

    /// Bad credentials fail as connectionFailed, without the password in the description.
    @Test func badPasswordFailsToConnect() async throws {
        var configuration = TestDatabase.configuration
        configuration.connectionString = "postgresql://supabase_admin:wrong-secret@127.0.0.1:\(TestDatabase.port)/whereabot_test"
        let error = await #expect(throws: PGError.self) { try await PGConnection.connect(configuration) }
        #expect(error?.code == .connectionFailed)
        #expect(error.map { !"\($0)".contains("wrong-secret") } == true)
    }
}
