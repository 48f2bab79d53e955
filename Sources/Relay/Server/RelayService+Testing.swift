import Loop

/// Hooks for tests only, outside the production type's declaration: production code never
/// calls them. They move an instance's manual clock and look at its database pool.
extension RelayService {
    /// Test only: moves the instance's manual clock (`Configuration.clock`) on by `duration`;
    /// what falls due runs before it returns. A statement in flight on the loop's pool then
    /// has taken that long (and may time out): move time while `databaseIdle`.
    public func advance(by duration: Duration) async {
        await loop.advance(by: duration)
    }

    /// Test only: whether no statement of the pool on the instance's loop waits for Postgres.
    public var databaseIdle: Bool {
        get async {
            let health = await database.pool.health
            return health.open == health.idle && health.sharedOutstanding == 0
        }
    }

    /// Test only: statements and leases the instance's pool refused because it had shut
    /// down; 0 after a graceful stop, which stops every user of the pool before the pool
    /// (docs/architecture.md, "Lifecycle"). Every test that stops an instance checks it.
    public var databaseCallsAfterShutdown: Int {
        get async { await database.pool.health.refusedAfterShutdown }
    }
}
