import Foundation
import PGBus

/// Keeps one instance and the shared tables in step: a heartbeat every `interval` (which
/// also refreshes connected devices' last_seen_at every 5 minutes, and closes the sockets
/// revoked since the last beat), a backstop resync at every beat, a
/// full resync whenever the LISTEN connection came back or the instance's row vanished,
/// and a reap of dead instances every `reapEvery` beats. (The allocator's free memory is
/// given back by `HeapTrimmer.run()`, which looks every second.)
///
/// Notifications are hints; this loop is what makes a lost one harmless. Database errors
/// (a call past its deadline included) mark the instance not ready and are retried at the
/// next beat; a beat that does not complete lets readiness lapse after one interval.
final class RelayMaintenance: Sendable {
    /// Time between beats (and backstop polls).
    static let defaultInterval: Duration = .seconds(5)
    /// Beats between reaps; with the default interval a reap every 30 s.
    static let defaultReapEvery = 6
    /// An instance silent this long is dead (`relay.reap`).
    static let deadAfterSeconds = 30

    private enum Event {
        case beat
        case resync
    }

    private let instance: String
    private let database: RelayDatabase
    private let driver: InstanceDriver
    private let health: RelayHealth
    private let logger: Logger
    private let interval: Duration
    private let reapEvery: Int
    /// OAUTH_STALE_CLIENT_DAYS: the sweep of the authorization server's rows at each reap
    /// removes registered clients unused this long.
    private let staleClientDays: Int
    private let events: AsyncStream<Event>
    private let input: AsyncStream<Event>.Continuation

    init(instance: String, database: RelayDatabase, driver: InstanceDriver, health: RelayHealth,
         logger: Logger, interval: Duration = RelayMaintenance.defaultInterval,
         reapEvery: Int = RelayMaintenance.defaultReapEvery, staleClientDays: Int = OAuthSettings().staleClientDays) {
        self.logger = logger
        self.staleClientDays = staleClientDays
        self.instance = instance
        self.database = database
        self.driver = driver
        self.health = health
        self.interval = interval
        self.reapEvery = max(1, reapEvery)
        (events, input) = AsyncStream.makeStream()
    }

    /// The LISTEN connection is (again) active: re-read everything soon.
    func requestResync() {
        input.yield(.resync)
    }

    /// Beats and resyncs until `stop()` or until the task is cancelled.
    func run() async {
        let input = self.input, interval = self.interval, driver = self.driver
        await withTaskGroup(of: Void.self) { group in
            // The beat's ticker, and a hello that found this instance's row gone asking for a
            // resync: child tasks, cancelled and awaited when the beats end.
            group.addTask {
                while !Task.isCancelled {
                    try? await Task.sleep(for: interval)
                    input.yield(.beat)
                }
            }
            group.addTask {
                for await _ in driver.reregistrationRequests { input.yield(.resync) }
            }
            await beat()
            group.cancelAll()
        }
    }

    /// Handles the beats and resyncs as they come, until `stop()` or a cancellation.
    private func beat() async {
        var beats = 0
        var reregister = false
        for await event in events {
            if Task.isCancelled { return }
            // A resync beats too: a hello that found this instance's row gone asks for one,
            // and the beat re-creates the row before the sockets say hello again.
            if event == .resync { reregister = true } else { beats += 1 }
            do {
                if try await database.heartbeat(instance) { reregister = true }  // row vanished: crash or reaped
            } catch {
                logger.failure("heartbeat_failed", error, ["instance": instance])
                health.beatFailed(error)
                continue
            }
            if event == .beat {
                do {
                    try await driver.closeRevoked()  // signed-out sessions, removed devices: within one beat
                } catch {
                    logger.failure("revocation_check_failed", error)
                }
                if beats % reapEvery == 0 {
                    do {
                        let report = try await database.reap(deadAfter: Self.deadAfterSeconds)
                        if report.instances > 0 { logger.info("instances_reaped", ["instances": String(report.instances)]) }
                        try await database.forgetEndedSessions()
                        _ = try await database.sweepOAuth(staleDays: staleClientDays, limit: 1_000)
                        _ = try await database.refreshTimeZoneNames()
                    } catch {
                        logger.failure("reap_failed", error)
                    }
                }
            }
            do {
                let recreated = try await driver.resyncWaiters()
                try await driver.resyncPhones(reregister: reregister)
                health.recordResync(full: reregister, recreated: recreated)
                health.beatCompleted()  // both the heartbeat's connection and the shared pool answered
                reregister = false
            } catch {
                logger.failure("resync_failed", error)
                health.beatFailed(error)
            }
        }
    }

    /// Ends `run()`.
    func stop() {
        input.finish()
    }
}
