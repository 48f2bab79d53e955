import Foundation
import PGBus
import Testing

/// Every statement has a deadline (docs/deploy.md, "A database that hangs, and failover"): a
/// server that stops answering with its TCP connection open fails the statement with `timedOut`
/// by the deadline, the connection is abandoned, and a pool replaces it; failed connects back
/// off.
@Suite(.serialized) struct DeadlineTests {
    static func throughProxy(_ proxy: SilentProxy, timeout: Duration = .seconds(1)) -> PGConfiguration {
        var configuration = TestDatabase.configuration
        configuration.connectionString = TestDatabase.adminURL(port: proxy.port)
        configuration.callTimeout = timeout
        return configuration
    }

    static func seconds(since start: ContinuousClock.Instant) -> Double {
        let elapsed = ContinuousClock.now - start
        return Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
    }

    /// Before: the statement waited forever on a silent server.
    @Test func aSilentServerFailsTheStatementByItsDeadline() async throws {
        let proxy = try SilentProxy(upstreamPort: TestDatabase.port)
        defer { proxy.close() }
        let connection = try await PGConnection.connect(Self.throughProxy(proxy))
        #expect(try await connection.query("select 1").rows.count == 1)
        proxy.silence()
        let started = ContinuousClock.now
        let waiting = (0..<3).map { n in Task { try await connection.query("select $1::int", [n]) } }
        for task in waiting {
            let error = await #expect(throws: PGError(.timedOut)) { try await task.value }
            // The configured deadline (1 s) is the one that fired, not the default (5 s):
            // the loop's deadline check names it. Timed here, the test's own scheduling
            // counts too (3.96 s was seen under make test's load for a 1-s deadline).
            #expect(error.map { String(reflecting: $0) }?.contains("no answer within 1.0 seconds") == true, "\(String(describing: error))")
        }
        #expect(Self.seconds(since: started) < 60, "failed by a deadline, not after the kernel gave up on the connection")
        #expect(!connection.isUsable, "the connection is abandoned")
        await #expect(throws: PGError.self) { try await connection.query("select 1") }
    }

    /// A statement that answers in time is untouched, however many follow it.
    @Test func statementsWithinTheDeadlineAreUntouched() async throws {
        var configuration = TestDatabase.configuration
        configuration.callTimeout = .milliseconds(800)
        let connection = try await PGConnection.connect(configuration)
        for _ in 0..<3 {
            _ = try await connection.query("select pg_sleep(0.3)")
        }
        #expect(connection.isUsable)
        await #expect(throws: PGError(.timedOut)) { try await connection.query("select pg_sleep(2)") }
        await connection.close()
    }

    /// The pool replaces an abandoned connection at the next call.
    @Test func aPoolReplacesAnAbandonedConnection() async throws {
        let proxy = try SilentProxy(upstreamPort: TestDatabase.port)
        defer { proxy.close() }
        let pool = PGPool(configuration: Self.throughProxy(proxy), size: 1)
        #expect(try await pool.send("select 1").rows.count == 1)
        proxy.silence()  // connections open now go silent; new ones forward
        await #expect(throws: PGError(.timedOut)) { try await pool.send("select 2") }
        #expect(try await pool.send("select 3").scalar(Int.self) == 3, "a new connection answers")
        #expect(await pool.health.discarded >= 1)
        await pool.shutdown()
    }

    /// Connects that fail back off: callers meanwhile fail at once, without a login each.
    @Test func failedConnectsBackOff() async throws {
        var configuration = TestDatabase.configuration
        configuration.connectionString = TestDatabase.adminURL(port: 1)
        let pool = PGPool(configuration: configuration, connectBackoff: PGBackoff(initial: .seconds(10), maximum: .seconds(10)))
        await #expect(throws: PGError.self) { try await pool.send("select 1") }
        let started = ContinuousClock.now
        for _ in 0..<20 {
            await #expect(throws: PGError(.connectionFailed)) { try await pool.send("select 1") }
        }
        #expect(await pool.health.failedConnects == 1, "one login attempt, not twenty-one")
        #expect(Self.seconds(since: started) < 1)
        await pool.shutdown()
    }
}
