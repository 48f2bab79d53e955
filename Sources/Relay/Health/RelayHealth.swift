import Foundation
import HTTPServer
import PGBus
import Synchronization

/// Readiness and metrics of one instance: /readyz is 200 only while the instance is not
/// draining, the LISTEN connection is up (its own heartbeat answered in time), a heartbeat
/// completed a round trip on both the heartbeat's connection and the shared pool within the
/// last heartbeat interval — on a writable primary, since `relay.heartbeat` writes — and,
/// with a JWKS URL, the signing keys were read. A beat that hangs therefore turns /readyz
/// to 503 by itself, without having to fail first. Otherwise /readyz is 503 with one line
/// per thing missing (`readiness()`). /metrics is Prometheus text.
final class RelayHealth: Sendable {
    private let listener: PGListener
    private let driver: InstanceDriver
    private let draining = Atomic<Bool>(false)
    /// When the last complete beat (heartbeat and resync) ended, in nanoseconds after `started`.
    private let lastGoodBeat = Atomic<Int64>(0)
    /// How old the last good beat may be for the instance to be ready.
    private let freshness: Duration
    /// The instance's clock, which the beats' freshness is measured on.
    private let clock: RelayClock
    /// When the instance was built, on `clock`.
    private let started: ContinuousClock.Instant
    private let resyncs = Atomic<Int>(0)
    private let recreated = Atomic<Int>(0)
    private let locates: LocateMetrics
    private let pushes: PushMetrics
    private let sealedAnswers: SealedAnswerMemory
    private let authenticator: Authenticator
    private let logger: Logger
    private let server: HTTPServerCounters
    /// The database, as the start's registration and every beat found it.
    let database: DependencyStatus
    /// Where the LISTEN connection goes (for its /readyz line).
    private let listenerEndpoint: String
    /// Supabase Auth's signing keys (a JWKS URL that has not answered yet).
    let signingKeys: DependencyStatus
    /// The allocator's memory, trimmed at every maintenance beat that finds enough free.
    let heap: HeapTrimmer

    init(listener: PGListener, driver: InstanceDriver, locates: LocateMetrics,
         sealedAnswers: SealedAnswerMemory, authenticator: Authenticator, pushes: PushMetrics = PushMetrics(), logger: Logger,
         heartbeatInterval: Duration = RelayMaintenance.defaultInterval, databaseEndpoint: String = "",
         listenerEndpoint: String = "", signingKeys: String = "", server: HTTPServerCounters = HTTPServerCounters(),
         clock: RelayClock) {
        self.clock = clock
        self.started = clock.instant
        self.heap = HeapTrimmer(clock: clock)
        self.freshness = heartbeatInterval + .seconds(1)
        self.server = server
        self.database = DependencyStatus(name: "database", endpoint: databaseEndpoint, reason: "connecting", logger: logger)
        self.listenerEndpoint = listenerEndpoint
        self.signingKeys = DependencyStatus(name: "signing keys", endpoint: signingKeys, reason: nil, logger: logger)
        self.pushes = pushes
        self.authenticator = authenticator
        self.logger = logger
        self.listener = listener
        self.driver = driver
        self.locates = locates
        self.sealedAnswers = sealedAnswers
    }

    /// From now on /readyz answers 503 (graceful drain).
    func startDraining() { draining.store(true, ordering: .relaxed) }

    var isDraining: Bool { draining.load(ordering: .relaxed) }

    /// A beat completed its round trips (heartbeat and resync; the registration at start
    /// counts as one); until `freshness` has passed without another, the database counts as up.
    func beatCompleted() {
        lastGoodBeat.store(Int64((clock.instant - started) / .nanoseconds(1)), ordering: .relaxed)
        database.reached()
    }

    /// A beat (or the registration at start) failed: the database counts as down at once.
    func beatFailed(_ error: any Error) {
        lastGoodBeat.store(Int64.min / 2, ordering: .relaxed)
        database.failed((error as? PGError)?.reason ?? "connection failed")
    }

    /// Whether the last good beat is recent enough.
    var isDatabaseUp: Bool {
        let age = (clock.instant - started) - .nanoseconds(lastGoodBeat.load(ordering: .relaxed))
        return database.isReachable && age <= freshness
    }

    /// A full resync finished; `recreated` rows were re-created after a crash.
    func recordResync(full: Bool, recreated count: Int) {
        if full { resyncs.add(1, ordering: .relaxed) }
        recreated.add(count, ordering: .relaxed)
    }

    /// What /readyz says: nothing missing (ready), or one line per thing that is —
    /// `draining`; `database HOST:PORT: REASON` (not reached, or no beat answered within the
    /// heartbeat interval); `database listener HOST:PORT: REASON` (the database answers but
    /// LISTEN is not active); `signing keys URL: REASON`.
    func readiness() -> (missing: [String], body: String) {
        var missing: [String] = []
        if isDraining { missing.append("draining") }
        if let line = database.missing {
            missing.append(line)
        } else if !isDatabaseUp {
            missing.append("database \(database.endpoint): no heartbeat answered within \(freshness.components.seconds) s")
        } else if !listener.state.isListening {
            missing.append("database listener \(listenerEndpoint): \(listener.lastFailure?.reason ?? "connecting")")
        }
        if let line = signingKeys.missing { missing.append(line) }
        return (missing, missing.isEmpty ? "ready" : missing.joined(separator: "\n") + "\n")
    }

    /// Gauges and counters; labels never carry user data.
    func metrics() async -> String {
        let devices = await driver.connectedCount
        let waiting = await driver.waitingCount
        let held = await driver.heldCount
        let rateLimited = await authenticator.rateLimited
        let heap = self.heap.look()
        let failures = logger.failureCounts.sorted { $0.key < $1.key }
            .map { "whereabot_failures_total{event=\"\($0.key)\"} \($0.value)" }.joined(separator: "\n")
        return """
            # HELP whereabot_device_connections Phones connected to this instance (after hello).
            # TYPE whereabot_device_connections gauge
            whereabot_device_connections \(devices)
            # HELP whereabot_heap_in_use_bytes Bytes the process's allocator has handed out (glibc mallinfo2).
            # TYPE whereabot_heap_in_use_bytes gauge
            whereabot_heap_in_use_bytes \(heap.inUse)
            # HELP whereabot_heap_free_bytes Bytes the allocator holds free, not given back to the system.
            # TYPE whereabot_heap_free_bytes gauge
            whereabot_heap_free_bytes \(heap.free)
            # HELP whereabot_heap_trims_total Times the allocator's free memory was given back to the system (HeapTrimmer).
            # TYPE whereabot_heap_trims_total counter
            whereabot_heap_trims_total \(self.heap.trims)
            # HELP whereabot_pending_requests Locate requests waiting on this instance.
            # TYPE whereabot_pending_requests gauge
            whereabot_pending_requests \(waiting)
            # HELP whereabot_listener_up Whether the LISTEN connection is up.
            # TYPE whereabot_listener_up gauge
            whereabot_listener_up \(listener.state.isListening ? 1 : 0)
            # HELP whereabot_notifications_received_total Notifications received since start.
            # TYPE whereabot_notifications_received_total counter
            whereabot_notifications_received_total \(listener.notificationsReceived)
            # HELP whereabot_listener_reconnects_total LISTEN connections re-established.
            # TYPE whereabot_listener_reconnects_total counter
            whereabot_listener_reconnects_total \(listener.reconnects)
            # HELP whereabot_database_up Whether a heartbeat and a resync completed on a writable primary within the last heartbeat interval.
            # TYPE whereabot_database_up gauge
            whereabot_database_up \(isDatabaseUp ? 1 : 0)
            # HELP whereabot_held_answers Phone answers waiting for the database to take them.
            # TYPE whereabot_held_answers gauge
            whereabot_held_answers \(held)
            # HELP whereabot_answers_replayed_total Sealed answers sent again to a waiter that missed them.
            # TYPE whereabot_answers_replayed_total counter
            whereabot_answers_replayed_total \(sealedAnswers.replayed)
            # HELP whereabot_resyncs_total Full resyncs (after a LISTEN reconnect or a vanished instance row).
            # TYPE whereabot_resyncs_total counter
            whereabot_resyncs_total \(resyncs.load(ordering: .relaxed))
            # HELP whereabot_requests_recreated_total Waiting requests whose rows were re-created after a crash.
            # TYPE whereabot_requests_recreated_total counter
            whereabot_requests_recreated_total \(recreated.load(ordering: .relaxed))
            # HELP whereabot_auth_rate_limited_total Requests refused with 429 for too many failed authentications.
            # TYPE whereabot_auth_rate_limited_total counter
            whereabot_auth_rate_limited_total \(rateLimited)
            # HELP whereabot_forwarded_headers_ignored_total Requests from a trusted proxy whose X-Forwarded-For or Forwarded was malformed or contradicted the other (the proxy counted as the client).
            # TYPE whereabot_forwarded_headers_ignored_total counter
            whereabot_forwarded_headers_ignored_total \(server.forwardedHeadersIgnored)
            # HELP whereabot_hello_queue Phone sockets queued for a place among those waiting for their hello.
            # TYPE whereabot_hello_queue gauge
            whereabot_hello_queue \(driver.waitingRoom.queuedCount)
            # HELP whereabot_log_lines_dropped_total Log lines dropped because standard error was not read fast enough.
            # TYPE whereabot_log_lines_dropped_total counter
            whereabot_log_lines_dropped_total \(LogWriter.standardError.dropped)
            # HELP whereabot_failures_total Failed I/O and other warnings, by stable event name (README lists them).
            # TYPE whereabot_failures_total counter
            \(failures)

            """ + locates.text + pushes.text
    }
}
