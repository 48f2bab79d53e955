import PGBus
import Testing
import TestSupport

/// The pool bounds connections, queues callers, times out, and replaces broken connections.
@Suite struct PoolTests {
    /// 200 concurrent queries through a pool of 4 all complete, on at most 4 connections.
    @Test func twoHundredConcurrentQueriesThroughFourConnections() async throws {
        // The wait for a connection is not what this test is about: 200 callers queue on 4
        // connections, and on a loaded machine the last waited past the default 5 s
        // (`poolTimeout`); the timeout has a test of its own below.
        let pool = PGPool(configuration: TestDatabase.configuration, size: 4, acquireTimeout: .seconds(60))
        let results = try await withThrowingTaskGroup(of: (Int, Int32).self) { group in
            for n in 0..<200 {
                group.addTask {
                    let row = try #require(try await pool.query(
                        "select $1::int + 1, pg_backend_pid() from pg_sleep(0.005)", [n]).first)
                    #expect(try row.decode(0, as: Int.self) == n + 1)
                    return (n, try row.decode(1, as: Int32.self))
                }
            }
            var all: [(Int, Int32)] = []
            for try await result in group { all.append(result) }
            return all
        }
        #expect(results.count == 200)
        #expect(Set(results.map(\.1)).count <= 4)
        let health = await pool.health
        #expect(health.open <= 4 && health.waiting == 0)
        await pool.shutdown()
    }

    /// With every connection leased, a caller waits up to the acquire timeout, then fails.
    @Test func acquireTimesOutWhenEveryConnectionIsBusy() async throws {
        let pool = PGPool(configuration: TestDatabase.configuration, size: 1, acquireTimeout: .milliseconds(200))
        let holder = Task { try await pool.query("select pg_sleep(1)") }
        try await eventually("the holder leases the one connection") {
            let health = await pool.health
            return health.open == 1 && health.idle == 0
        }
        let error = await #expect(throws: PGError.self) { try await pool.query("select 1") }
        #expect(error?.code == .poolTimeout)
        _ = try await holder.value
        #expect(try await pool.query("select 2").scalar(Int.self) == 2)
        await pool.shutdown()
    }

    /// A caller waiting for a connection whose task is cancelled fails at once, and its place
    /// in the queue is gone: the pool serves the next caller.
    @Test func aCancelledWaiterLeavesTheQueue() async throws {
        let pool = PGPool(configuration: TestDatabase.configuration, size: 1, acquireTimeout: .seconds(60))
        let holder = Task { try await pool.query("select pg_sleep(0.5)") }
        try await eventually("the holder leases the one connection") {
            let health = await pool.health
            return health.open == 1 && health.idle == 0
        }
        let waiter = Task { try await pool.query("select 1") }
        try await eventually("the second caller waits") { await pool.health.waiting == 1 }
        waiter.cancel()
        await #expect(throws: CancellationError.self) { try await waiter.value }
        #expect(await pool.health.waiting == 0)
        _ = try await holder.value
        #expect(try await pool.query("select 2").scalar(Int.self) == 2)
        await pool.shutdown()
    }

    /// A connection whose backend was terminated is discarded; the next caller gets a new one.
    /// Its socket is watched by the loop even while idle, so the loss is noticed before any
    /// caller tries the dead connection.
    @Test func brokenConnectionIsDiscardedAndReplaced() async throws {
        let pool = PGPool(configuration: TestDatabase.configuration, size: 1)
        let pid = try await pool.query("select pg_backend_pid()").scalar(Int32.self)
        let killer = try await TestDatabase.connect()
        try await killer.query("select pg_terminate_backend($1)", [pid])
        await killer.close()
        try await eventually("the pool notices the loss by itself") { await pool.health.idle == 0 }
        #expect(await pool.health.discarded == 0, "no caller has tried the dead connection yet")
        let newPID = try await pool.query("select pg_backend_pid()").scalar(Int32.self)
        #expect(newPID != pid)
        #expect(await pool.health.discarded == 1)
        await pool.shutdown()
        let error = await #expect(throws: PGError.self) { try await pool.query("select 1") }
        #expect(error?.code == .shutDown)
    }
}
