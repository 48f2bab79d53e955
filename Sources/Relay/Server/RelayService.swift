import Foundation
import HTTPServer
import Lifecycle
import Loop
import PGBus

/// One relay instance: the HTTP server, the LISTEN connection and the parts between them.
///
/// Lifecycle (docs/architecture.md, "Lifecycle"): every long-lived part is a service of one
/// `ServiceGroup` (`RelayService+Services.swift`). `start()` starts them in order — the loop,
/// the database pool, the driver's calls, the signing keys, LISTEN, the heartbeat (which
/// registers the instance), push, the HTTP server — and `run()` waits until `shutdown()` has
/// stopped them in the reverse order, each awaited before the next: first the drain —
/// /readyz turns 503, new agent requests and phones get 503 with Retry-After, device
/// sockets close 1012 "restart" (the phones reconnect to another instance), and requests
/// already waiting here keep waiting until settled or past their deadline — then the
/// server, pushes, the heartbeat, LISTEN and the bus, the phones' calls in tasks of their
/// own (`InstanceDriver.finish()`), and only then the database pool, so that no call starts
/// on a shut pool (`databaseCallsAfterShutdown`, which the tests' every stop checks).
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

    /// The one thread of the hot path: HTTP and WebSocket sockets, the database pool's
    /// connections, request handlers and the actors they call.
    let loop: EventLoop
    /// The instance's one clock (its loop's), which every part reads the time on.
    private let clock: RelayClock
    let database: RelayDatabase
    private let server: HTTPServer
    /// The instance's services, in start order (`RelayService+Services.swift`).
    private let services: ServiceGroup
    /// Yields each time LISTEN is active (again); ends when the bus stops.
    private let listening: AsyncStream<Void>
    private let drain = DrainDeadline()

    /// Builds an instance (nothing runs yet). The parts are created bottom-up, and each
    /// knows only parts created before it: the loop and the database pools; credentials;
    /// push; the instance's driver (`InstanceDriver`: the waiting calls and the phones);
    /// the locate service, MCP and the routes; health; and on top the
    /// maintenance, the server and the bus, which feed events down.
    public init(_ configuration: Configuration) throws {
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
        let sealedAnswers = SealedAnswerMemory(clock: clock)
        let driver = InstanceDriver(instance: configuration.instanceID, database: database, authenticator: authenticator,
                                    logger: logger, pushes: pushes, sealedAnswers: sealedAnswers,
                                    pushOrigins: configuration.push.webPushOrigins, executor: loop, timers: timers)
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
        let serverCounters = HTTPServerCounters()
        let health = RelayHealth(listener: listener, driver: driver, locates: locateMetrics,
                                 sealedAnswers: sealedAnswers, authenticator: authenticator, pushes: pushMetrics, logger: logger,
                                 heartbeatInterval: configuration.heartbeatInterval,
                                 databaseEndpoint: configuration.database.endpoint, listenerEndpoint: listenDatabase.endpoint,
                                 signingKeys: configuration.jwks.displayName, server: serverCounters, clock: clock)
        let maintenance = RelayMaintenance(instance: configuration.instanceID, database: beatDatabase, driver: driver,
                                           health: health, logger: logger, interval: configuration.heartbeatInterval,
                                           reapEvery: configuration.reapEvery, staleClientDays: configuration.oauth.staleClientDays)
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
        self.server = HTTPServer(host: configuration.host, port: configuration.port,
                                 trustedProxies: configuration.trustedProxies, counters: serverCounters, log: { event, fields in logger.warning(event, fields) }, loop: loop) { await routes.handle($0) }
        let bus = RelayBus(instance: configuration.instanceID, driver: driver, authenticator: authenticator,
                           maintenance: maintenance, pushes: pushes, logger: logger)
        let (listening, listened) = AsyncStream<Void>.makeStream(bufferingPolicy: .bufferingNewest(1))
        self.listening = listening
        let parts = Parts(configuration: configuration, loop: loop, clock: clock, database: database, beatDatabase: beatDatabase,
                          authenticator: authenticator, timers: timers, pushes: pushes, driver: driver, listener: listener,
                          bus: bus, health: health, maintenance: maintenance, server: server, listening: listened, drain: drain)
        self.services = ServiceGroup(Self.services(parts)) { event, service, error in
            if let error { logger.failure(event, error, ["service": service]) } else { logger.error(event, ["service": service]) }
        }
    }

    /// How the start retries what does not answer yet (the database, the JWKS URL) and how
    /// the LISTEN connection reconnects: a quarter second, doubling to 5 s, jittered.
    static let retryBackoff = PGBackoff(initial: .milliseconds(250), maximum: .seconds(5))

    /// Serves at once (/healthz 200, /readyz 503 naming what is missing), then — in the
    /// background, retrying with `retryBackoff` until each answers — fetches the signing
    /// keys, registers the instance, LISTENs and starts the heartbeat: a relay started
    /// before its database or Supabase Auth becomes ready by itself when they answer.
    /// Returns the port once bound; with `untilListening` only once LISTEN is active too.
    /// Throws only what a restart cannot fix (the port cannot be bound: then no part has run,
    /// so the instance has not registered), or `CancellationError` when `shutdown()` came
    /// first.
    @discardableResult
    public func start(untilListening: Bool = true) async throws -> Int {
        try await services.start()
        guard let port = server.port else { throw CancellationError() }  // shut down while starting
        if untilListening {
            var iterator = listening.makeAsyncIterator()
            _ = await iterator.next()
        }
        return port
    }

    /// Waits until the instance has stopped: every service, the loop last. Returns the name
    /// of the part that ended by itself and so stopped the instance, or nil after `shutdown()`.
    @discardableResult
    public func run() async -> String? {
        if case .serviceEnded(let name) = await services.run() { return name }
        return nil
    }

    /// Graceful stop (see the type's overview). Waiting requests get until `drainTimeout`
    /// (by default past the longest possible wait); then the listener stops.
    public func shutdown(drainTimeout: Duration = RelayService.defaultDrainTimeout) async {
        _ = drain.fix(after: drainTimeout, now: clock.instant)
        await services.shutdown()
    }

    /// Longer than any request may wait (120 s plus the grace), so a drain loses none.
    public static let defaultDrainTimeout: Duration = .seconds(125)
}
