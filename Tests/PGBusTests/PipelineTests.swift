import Foundation
import Loop
import PGBus
import Testing
import TestSupport

/// Connections on an event loop: statements of many tasks pipelined on one connection,
/// each failing alone, prepared once; a connection sharing a loop with its callers; a
/// cancelled statement that has not reached the server; the pool's shared connections.
@Suite struct PipelineTests {
    /// 200 tasks on one connection get their own answers in order, and the one statement
    /// that fails (division by zero) fails alone.
    @Test func manyTasksShareOneConnection() async throws {
        let connection = try await TestDatabase.connect()
        defer { Task { await connection.close() } }
        let results = await withTaskGroup(of: (Int, Result<Int, Error>).self) { group in
            for index in 0..<200 {
                group.addTask {
                    do {
                        let divisor = index == 77 ? 0 : 1000 / (index + 1)
                        return (index, .success(try await connection.query("select 1000 / $1::int", [divisor]).scalar(Int.self)))
                    } catch {
                        return (index, .failure(error))
                    }
                }
            }
            var all: [Int: Result<Int, Error>] = [:]
            for await (index, result) in group { all[index] = result }
            return all
        }
        for index in 0..<200 where index != 77 {
            #expect(try results[index]?.get() == 1000 / (1000 / (index + 1)))
        }
        guard case .failure(let error)? = results[77] else { Issue.record("division by zero did not fail"); return }
        #expect((error as? PGError)?.sqlState == "22012")
        #expect(try await connection.query("select 2").scalar(Int.self) == 2)
    }

    /// The same SQL text is prepared once per connection and reused.
    @Test func statementsArePreparedOnce() async throws {
        let connection = try await TestDatabase.connect()
        defer { Task { await connection.close() } }
        for value in 0..<10 { #expect(try await connection.query("select $1::int + 1", [value]).scalar(Int.self) == value + 1) }
        let prepared = try await connection.query(
            "select count(*)::int from pg_prepared_statements where statement = 'select $1::int + 1'").scalar(Int.self)
        #expect(prepared == 1)
        // A statement that fails to prepare is not remembered as prepared.
        await #expect(throws: PGError.self) { try await connection.query("select * from pgbus_no_such_table") }
        try await connection.query("create temp table pgbus_no_such_table (x int)")
        #expect(try await connection.query("select * from pgbus_no_such_table").rows.isEmpty)
    }

    /// On a loop shared with its callers, a task that prefers the loop gets its result on
    /// the loop's thread: no other thread is involved.
    @Test func resultsResumeOnTheSharedLoop() async throws {
        let loop = try EventLoop.start(name: "pgbus-test-loop")
        defer { loop.stop() }
        let connection = try await PGConnection.connect(TestDatabase.configuration, on: loop)
        let onLoop = try await Task(executorPreference: loop) {
            var every = true
            for _ in 0..<20 {
                _ = try await connection.query("select 1")
                every = every && loop.inLoop
            }
            return every
        }.value
        #expect(onLoop)
        await connection.close()
        await #expect(throws: PGError.self) { try await connection.query("select 1") }
    }

    /// A statement whose task is cancelled before it is sent never runs; one cancelled
    /// while it waits behind another ends cancelled or done, and the connection goes on.
    @Test func cancelledStatements() async throws {
        let connection = try await TestDatabase.connect()
        defer { Task { await connection.close() } }
        let table = "pgbus_cancel_\(UUID().uuidString.prefix(8).lowercased())"
        try await connection.query("create temp table \(table) (x int)")
        let gate = AsyncStream<Void>.makeStream()
        let early = Task {
            for await _ in gate.stream { break }
            return try await connection.query("insert into \(table) values (1)")
        }
        early.cancel()
        gate.continuation.yield()
        await #expect(throws: CancellationError.self) { try await early.value }

        // The statement in front waits on a lock another connection holds until the one
        // behind it is submitted and cancelled: a timed statement in front (it slept 0.3 s)
        // could end before a loaded machine submitted the one behind, which then never saw
        // two outstanding (clean-clone CI run of 240bbdf).
        let holder = try await TestDatabase.connect()
        defer { Task { await holder.close() } }
        try await holder.query("select pg_advisory_lock(hashtext($1))", [table])
        let slow = Task { try await connection.query("select pg_advisory_xact_lock(hashtext($1))", [table]) }
        try await eventually("the slow statement is submitted") { connection.outstanding == 1 }
        let behind = Task { try await connection.query("select pg_sleep(5)") }
        try await eventually("the statement behind it is submitted") { connection.outstanding == 2 }
        behind.cancel()
        try await holder.query("select pg_advisory_unlock(hashtext($1))", [table])
        _ = try await slow.value
        await #expect(throws: CancellationError.self) { try await behind.value }
        #expect(try await connection.query("select count(*)::int from \(table)").scalar(Int.self) == 0)
    }

    /// `send` pipelines many tasks' statements over at most `sharedConnections` connections.
    @Test func sendUsesTheSharedConnections() async throws {
        let pool = PGPool(configuration: TestDatabase.configuration, size: 4, sharedConnections: 2)
        let pids = try await withThrowingTaskGroup(of: Int32.self) { group in
            for _ in 0..<100 { group.addTask { try await pool.send("select pg_backend_pid()").scalar(Int32.self) } }
            var all = Set<Int32>()
            for try await pid in group { all.insert(pid) }
            return all
        }
        #expect((1...2).contains(pids.count))
        #expect(await pool.health.open == 0)  // no leased connection was needed
        await pool.shutdown()
        let error = await #expect(throws: PGError.self) { try await pool.send("select 1") }
        #expect(error?.code == .shutDown)
    }

    /// A shared connection whose backend was terminated is discarded by the next `send`,
    /// even while another shared connection is idle and could take the statement at once.
    @Test func sendDiscardsABrokenSharedConnection() async throws {
        let pool = PGPool(configuration: TestDatabase.configuration, size: 1, sharedConnections: 2)
        let sleeper = Task { try await pool.send("select pg_backend_pid() from pg_sleep(0.3)").scalar(Int32.self) }
        try await eventually("the first shared connection is busy") { await pool.health.sharedOutstanding == 1 }
        let second = try await pool.send("select pg_backend_pid()").scalar(Int32.self)
        let first = try await sleeper.value
        #expect(first != second, "a busy connection made the pool open its second")
        let killer = try await TestDatabase.connect()
        try await killer.query("select pg_terminate_backend($1)", [second])
        await killer.close()
        try await eventually("a send after the loss discards the dead connection") {
            guard (try? await pool.send("select 1")) != nil else { return false }  // it may try it before the loop saw it
            return await pool.health.discarded == 1
        }
        #expect(try await pool.send("select pg_backend_pid()").scalar(Int32.self) == first)
        await pool.shutdown()
    }

    /// Statements waiting on the shared connections are bounded: past the bound `send`
    /// fails at once instead of queueing.
    @Test func sharedConnectionsRefuseStatementsPastTheirBound() async throws {
        let pool = PGPool(configuration: TestDatabase.configuration, size: 1, sharedConnections: 1, maximumOutstanding: 3)
        defer { Task { await pool.shutdown() } }
        try await pool.send("select 1")
        let sleepers = (0..<3).map { _ in Task { try await pool.send("select pg_sleep(0.5)") } }
        try await eventually("three statements wait on the shared connection") { await pool.health.sharedOutstanding == 3 }
        let refused = await #expect(throws: PGError.self) { try await pool.send("select 1") }
        #expect(refused?.code == .poolTimeout)
        for sleeper in sleepers { _ = try await sleeper.value }
        #expect(try await pool.send("select 2").scalar(Int.self) == 2)
    }

    /// At most `maximumPrepared` statements are prepared per connection; later texts run
    /// unnamed and still answer.
    @Test func preparedStatementsAreBounded() async throws {
        let connection = try await TestDatabase.connect()
        defer { Task { await connection.close() } }
        for index in 0..<300 {
            #expect(try await connection.query("select \(index)::int + $1::int", [1]).scalar(Int.self) == index + 1)
        }
        let prepared = try await connection.query("select count(*)::int from pg_prepared_statements").scalar(Int.self)
        #expect(prepared == 256)
    }
}
