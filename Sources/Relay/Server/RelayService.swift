import Foundation
import HTTPServer
import Loop
import PGBus
import Synchronization

/// One relay instance: the HTTP server, the LISTEN connection and the parts between them.
///
/// Lifecycle: `start()` registers the instance, starts listening and serving; `run()` waits
/// until `shutdown()` has drained it: /readyz turns 503, new agent requests and phones get
/// 503 with Retry-After, device sockets close 1012 "restart" (the phones reconnect to
/// another instance), and requests already waiting here keep waiting until settled or
/// past their deadline. Then the parts stop in reverse order of their start — server,
/// pushes, maintenance, listener and bus, the phones' calls in tasks of their own
/// (`InstanceDriver.finish()`) — and only then the database pool, so that no call starts on a
/// shut pool (`databaseCallsAfterShutdown`, which the tests' every stop checks).
public final class RelayService: Sendable {
    /// What an instance needs.
    public struct Configuration: Sendable {
        /// The relay role's connection (pooled).
        public var database: PGConfiguration
        /// A direct connection for LISTEN (defaults to `database`).
        public var listenDatabase: PGConfiguration?
        /// Listen address and port (0: any free port).
        public var host: String
        public var port: Int
        /// The public base URL (for WWW-Authenticate and metadata).
        public var publicURL: String
        /// This instance's id.
        public var instanceID: String
        /// SUPABASE_JWT_SECRET.
        public var jwtSecret: String?
        /// The JWKS source.
        public var jwks: JWKSSource
        /// The expected issuer, when SUPABASE_URL is set.
        public var issuer: String?
        /// OAUTH_AUDIENCE: an `aud` every OAuth client's token must carry besides
        /// `authenticated` (set it when the project's access-token hook adds the relay's URL).
        public var oauthAudience: String?
        /// SUPABASE_URL (the authorization server is SUPABASE_URL/auth/v1).
        public var supabaseURL: String?
        /// SUPABASE_ANON_KEY: the browser phone signs in with it (Supabase Auth's `apikey`).
        public var supabaseAnonKey: String?
        /// ALLOW_FOR_SECONDS: how long the browser phone's "Allow for 1 hour" allows an
        /// agent (3600; tests shorten it).
        public var allowForSeconds = 3600
        /// Browser origins allowed on /mcp besides the public URL.
        public var allowedOrigins: [String] = []
        /// Load balancers whose PROXY protocol header names the client (TRUSTED_PROXIES):
        /// per-client limits then count the real client, not the balancer.
        public var trustedProxies: TrustedProxies = .none
        /// Time between heartbeats (which also refresh connected devices' last_seen_at every
        /// 5 minutes and run the backstop resync).
        public var heartbeatInterval: Duration = RelayMaintenance.defaultInterval
        /// Heartbeats between reaps of instances silent for 30 s.
        public var reapEvery: Int = RelayMaintenance.defaultReapEvery
        /// Where the instance's JSON log lines go (LOG_LEVEL).
        public var logger = Logger()
        /// How often an MCP tool call streamed over SSE reports progress (MCP_PROGRESS_SECONDS).
        public var mcpProgressInterval: Duration = .seconds(15)
        /// How long one MCP call waits for the person before it answers "still waiting" with
        /// a request_id (MCP_WAIT_SECONDS, 5 to 110).
        public var mcpWaitBound: Duration = .seconds(45)
        /// APP_DIR: serve /app/ from this directory instead of the resource bundle (working on
        /// the page: edits show on the next start without a build).
        public var appDirectory: URL?
        /// How long a JWKS is kept before it is read again (its `max-age` within these
        /// bounds; JWKS_MIN_REFRESH_SECONDS lowers the floor, for tests).
        public var jwksRefresh = Authenticator.defaultJWKSRefresh
        /// REQUEST_ID_KEY: 32 bytes every instance shares, under which task secrets are
        /// wrapped so that tasks/list can name them (nil: tasks/list is not offered).
        public var requestIDKey: [UInt8]?
        /// APNs and Web Push (each off unless configured; docs/operations.md, "Configuration").
        public var push = PushServices.none
        /// The agents' authorization server (OAUTH_* settings).
        public var oauth = OAuthSettings()
        /// GRANT_REMINDER_DAYS in seconds (docs/protocol.md, "Reminders"): a for-good always-allow used this long
        /// after it was made or kept reminds the person at its next use; nil: never.
        public var grantReminderSeconds: Int? = 30 * 86_400
        /// The clock of the instance's event loop, which runs its timers (a call's wait,
        /// the phones' batch windows, push timing): `.manual` only in tests, which then
        /// move time with `advance(by:)`.
        public var clock = LoopClock.continuous

        /// Creates a configuration.
        public init(database: PGConfiguration, listenDatabase: PGConfiguration? = nil, host: String = "127.0.0.1",
                    port: Int = 8080, publicURL: String, instanceID: String, jwtSecret: String?,
                    jwks: JWKSSource = .none, issuer: String? = nil) {
            self.database = database
            self.listenDatabase = listenDatabase
            self.host = host
            self.port = port
            self.publicURL = publicURL
            self.instanceID = instanceID
            self.jwtSecret = jwtSecret
            self.jwks = jwks
            self.issuer = issuer
        }
    }

    private let configuration: Configuration
    /// The one thread of the hot path: HTTP and WebSocket sockets, the database pool's
    /// connections, request handlers and the actors they call.
    private let loop: EventLoop
    /// The instance's one clock (its loop's), which every part reads the time on.
    private let clock: RelayClock

    /// Moves the instance's manual clock (`Configuration.clock`) on by `duration`; what falls
    /// due runs before it returns. A statement in flight on the loop's pool then has taken
    /// that long (and may time out): move time while `databaseIdle`.
    public func advance(by duration: Duration) async {
        await loop.advance(by: duration)
    }

    /// Whether no statement of the pool on the instance's loop waits for Postgres.
    public var databaseIdle: Bool {
        get async {
            let health = await database.pool.health
            return health.open == health.idle && health.sharedOutstanding == 0
        }
    }

    /// Statements and leases the instance's pool refused because it had shut down: 0 after
    /// a graceful stop, which stops every user of the pool before the pool.
    public var databaseCallsAfterShutdown: Int {
        get async { await database.pool.health.refusedAfterShutdown }
    }

    private let server: HTTPServer
    private let listener: PGListener
    private let database: RelayDatabase
    private let bus: RelayBus
    private let busTask = Mutex<Task<Void, Never>?>(nil)
    private let health: RelayHealth
    private let driver: InstanceDriver
    private let maintenance: RelayMaintenance
    private let pushes: PushSender
    private let authenticator: Authenticator

    /// Builds an instance (nothing runs yet). The parts are created bottom-up, and each
    /// knows only parts created before it: the loop and the database pools; credentials;
    /// push; the instance's driver (`InstanceDriver`: the waiting calls and the phones);
    /// the locate service, MCP and the routes; health; and on top the
    /// maintenance, the server and the bus, which feed events down.
    public init(_ configuration: Configuration) throws {
        self.configuration = configuration
        let logger = configuration.logger
        let loop = try EventLoop.start(name: "relay-loop", clock: configuration.clock)
        self.loop = loop
        let clock = RelayClock(loop: loop)
        self.clock = clock
        let database = RelayDatabase(pool: PGPool(configuration: configuration.database, size: 8, loop: loop,
                                                  sharedConnections: 2),
                                     grantReminderSeconds: configuration.grantReminderSeconds)
        self.database = database
        // The heartbeat has a connection of its own: no flood on the shared pool can delay
        // it long enough for the other instances to reap this one.
        var maintenanceDatabase = configuration.database
        maintenanceDatabase.applicationName += "-beat"
        let beatDatabase = RelayDatabase(pool: PGPool(configuration: maintenanceDatabase, size: 1))
        let authenticator = try Authenticator(hmacSecret: configuration.jwtSecret, jwks: configuration.jwks,
                                              issuer: configuration.issuer, audience: configuration.oauthAudience,
                                              database: database, logger: logger, relayIssuer: configuration.publicURL,
                                              jwksRefresh: configuration.jwksRefresh, clock: clock)
        let pushMetrics = PushMetrics()
        let dispatcher = PushDispatcher(services: configuration.push, database: database, metrics: pushMetrics, logger: logger,
                                        clock: clock)
        let timers = RelayTimers(loop: loop)
        let pushes = PushSender(instance: configuration.instanceID, database: database, dispatcher: dispatcher,
                                timing: configuration.push.timing, budgets: configuration.push.budgets, metrics: pushMetrics,
                                logger: logger)
        self.pushes = pushes
        let sealedAnswers = SealedAnswerMemory(clock: clock)
        let driver = InstanceDriver(instance: configuration.instanceID, database: database, authenticator: authenticator,
                                    logger: logger, pushes: pushes, sealedAnswers: sealedAnswers,
                                    pushOrigins: configuration.push.webPushOrigins, executor: loop, timers: timers)
        self.driver = driver
        let locateMetrics = LocateMetrics()
        let locator = LocateService(driver: driver, database: database, metrics: locateMetrics,
                                    clientNames: ClientNames(database: database, logger: logger, clock: clock), clock: clock,
                                    requestIDKey: configuration.requestIDKey)
        let polls = PollLimiter(clock: clock)
        let publicURL = configuration.publicURL
        let gate = AgentGate(authenticator: authenticator, publicURL: publicURL)
        var mcp = MCPHandler(gate: gate, locator: locator, database: database,
                             allowedOrigins: Set([configuration.publicURL] + configuration.allowedOrigins), logger: logger)
        mcp.progressInterval = configuration.mcpProgressInterval
        mcp.waitBound = configuration.mcpWaitBound
        mcp.polls = polls
        var listenDatabase = configuration.listenDatabase ?? configuration.database
        if configuration.listenDatabase == nil { listenDatabase.applicationName += "-listen" }
        // The LISTEN connection's round trip is checked as often as the heartbeat, and a hung
        // server counts as dead after one call deadline.
        let listener = PGListener(configuration: listenDatabase, heartbeatInterval: configuration.heartbeatInterval,
                                  heartbeatTimeout: listenDatabase.callTimeout ?? PGListener.defaultHeartbeatTimeout,
                                  backoff: Self.retryBackoff, loop: loop)
        self.listener = listener
        let serverCounters = HTTPServerCounters()
        let health = RelayHealth(listener: listener, driver: driver, locates: locateMetrics,
                                 sealedAnswers: sealedAnswers, authenticator: authenticator, pushes: pushMetrics, logger: logger,
                                 heartbeatInterval: configuration.heartbeatInterval,
                                 databaseEndpoint: configuration.database.endpoint, listenerEndpoint: listenDatabase.endpoint,
                                 signingKeys: configuration.jwks.displayName, server: serverCounters, clock: clock)
        self.health = health
        let maintenance = RelayMaintenance(instance: configuration.instanceID, database: beatDatabase, driver: driver,
                                           health: health, logger: logger, interval: configuration.heartbeatInterval,
                                           reapEvery: configuration.reapEvery, staleClientDays: configuration.oauth.staleClientDays)
        self.maintenance = maintenance
        let routes = RelayRoutes(
            agents: AgentRoutes(gate: gate, locator: locator, durable: DurableRoutes(locator: locator, polls: polls, logger: logger),
                                mcp: mcp, logger: logger),
            phones: PhoneRoutes(authenticator: authenticator, driver: driver,
                                account: driver.account,
                                gate: gate, health: health, logger: logger,
                                allowedOrigins: Set([configuration.publicURL] + configuration.allowedOrigins)),
            operations: OperationsRoutes(health: health, publicURL: publicURL,
                                         authorizationServers: [publicURL],
                                         app: AppRoutes(publicURL: publicURL, supabaseURL: configuration.supabaseURL,
                                                        supabaseAnonKey: configuration.supabaseAnonKey,
                                                        vapidPublicKey: configuration.push.vapidPublicKey,
                                                        allowForSeconds: configuration.allowForSeconds,
                                                        directory: configuration.appDirectory)),
            oauth: OAuthServer(database: database, authenticator: authenticator,
                               documents: ClientDocuments(fetcher: DocumentFetch(allowLoopback: configuration.oauth.documentsFromLoopback,
                                                                                 caBundle: try configuration.oauth.caBundle()),
                                                          clock: clock),
                               settings: configuration.oauth, issuer: publicURL, logger: logger))
        self.authenticator = authenticator
        self.server = HTTPServer(host: configuration.host, port: configuration.port,
                                 trustedProxies: configuration.trustedProxies, counters: serverCounters, log: { event, fields in logger.warning(event, fields) }, loop: loop) { await routes.handle($0) }
        self.bus = RelayBus(instance: configuration.instanceID, driver: driver, authenticator: authenticator,
                            maintenance: maintenance, pushes: pushes, logger: logger)
    }

    /// How the start retries what does not answer yet (the database, the JWKS URL) and how
    /// the LISTEN connection reconnects: a quarter second, doubling to 5 s, jittered.
    static let retryBackoff = PGBackoff(initial: .milliseconds(250), maximum: .seconds(5))

    /// Serves at once (/healthz 200, /readyz 503 naming what is missing), then — in the
    /// background, retrying with `retryBackoff` until each answers — fetches the signing
    /// keys, registers the instance, LISTENs and starts the heartbeat: a relay started
    /// before its database or Supabase Auth becomes ready by itself when they answer.
    /// Returns the port once bound; with `untilListening` only once LISTEN is active too.
    /// Throws only what a restart cannot fix (the port cannot be bound).
    @discardableResult
    public func start(untilListening: Bool = true) async throws -> Int {
        let port = try server.start()
        announcePush()
        let (ready, readyContinuation) = AsyncStream<Void>.makeStream()
        let listener = self.listener, bus = self.bus, maintenance = self.maintenance, heap = health.heap
        let logger = configuration.logger
        let task = Task(executorPreference: loop) { [self] in
            await withTaskGroup(of: Void.self) { group in
                group.addTask { await self.keepSigningKeys() }
                group.addTask { await listener.run() }
                // Off the loop: a trim holds the allocator's locks for milliseconds.
                group.addTask(executorPreference: globalConcurrentExecutor) { await heap.run() }
                group.addTask {
                    do { try await bus.run(listener: listener) { readyContinuation.yield() } } catch {
                        logger.failure("listener_stopped", error)
                    }
                }
                guard await self.register() else { return }
                // Off the loop: a flood of requests must not delay the heartbeat.
                group.addTask(executorPreference: globalConcurrentExecutor) { await maintenance.run() }
            }
        }
        busTask.withLock { $0 = task }
        if untilListening {
            var iterator = ready.makeAsyncIterator()
            _ = await iterator.next()
        }
        return port
    }

    /// Registers the instance, retrying until the database answers; false when cancelled.
    private func register() async -> Bool {
        await retrying {
            do {
                let left = try await database.registerInstance(configuration.instanceID)
                health.beatCompleted()
                if left.connections > 0 || left.abandoned > 0 {
                    configuration.logger.info("instance_restarted", ["instance": configuration.instanceID,
                                                                     "connections": String(left.connections),
                                                                     "abandoned": String(left.abandoned)])
                }
                return true
            } catch {
                health.beatFailed(error)
                return false
            }
        }
    }

    /// Runs `attempt` until it succeeds, waiting `retryBackoff` after each failure; false
    /// when the task is cancelled first.
    private func retrying(_ attempt: () async -> Bool) async -> Bool {
        var failures = 0
        while !Task.isCancelled {
            if await attempt() { return true }
            do { try await Task.sleep(for: Self.retryBackoff.delay(attempt: failures, random: .random(in: 0...1))) } catch {
                return false
            }
            failures += 1
        }
        return false
    }

    /// Fetches the JWKS until it answers, then reads it again on its schedule
    /// (`Authenticator.refreshKeys()`: a withdrawn key is refused within one refresh).
    /// Keys already read keep working if it goes away later.
    private func keepSigningKeys() async {
        let loaded = await retrying {
            guard let failure = await authenticator.loadKeys() else { return true }
            health.signingKeys.failed(failure.reason)
            return false
        }
        guard loaded else { return }
        health.signingKeys.reached()
        guard configuration.jwks != .none else { return }
        var delay = await authenticator.keysRefreshAfter
        while !Task.isCancelled {
            do { try await Task.sleep(for: .milliseconds(Int(delay * 1000))) } catch { return }
            delay = await authenticator.refreshKeys()
        }
    }

    /// Says once which push services are off, and starts the push transport.
    private func announcePush() {
        let push = configuration.push
        if push.apns == nil {
            configuration.logger.info("apns disabled", ["reason": "APNS_KEY_ID, APNS_TEAM_ID, APNS_TOPIC and APNS_PRIVATE_KEY(_FILE) are not all set"])
        }
        if push.webPush == nil {
            configuration.logger.info("web push disabled", ["reason": "VAPID_PRIVATE_KEY and VAPID_SUBJECT are not both set"])
        }
        push.transport?.start()
    }

    /// Waits until the instance has stopped.
    public func run() async {
        await server.run()
        let task = busTask.withLock { $0 }
        await task?.value
    }

    /// Graceful stop (see the type's overview). Waiting requests get until `drainTimeout`
    /// (by default past the longest possible wait); then the listener stops.
    public func shutdown(drainTimeout: Duration = RelayService.defaultDrainTimeout) async {
        let deadline = clock.instant + drainTimeout
        health.startDraining()
        await driver.closeAll()
        await driver.untilIdle(within: deadline - clock.instant)
        await server.shutdown(drainTimeout: max(.zero, min(.seconds(2), deadline - clock.instant)),
                              webSocketCloseCode: WebSocketCloseCode.serviceRestart, reason: "restart")
        await driver.finishPushes()  // the requests' pushes under way are sent, and no more start
        await pushes.finishSending()  // and the reminders'
        configuration.push.transport?.shutdown()
        maintenance.stop()
        listener.shutdown()
        busTask.withLock { $0 }?.cancel()
        await busTask.withLock { $0 }?.value
        await driver.finish()  // the phones' batched calls end, and no more start
        await database.pool.shutdown()
        loop.stop()
    }

    /// Longer than any request may wait (120 s plus the grace), so a drain loses none.
    public static let defaultDrainTimeout: Duration = .seconds(125)
}
