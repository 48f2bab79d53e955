import Foundation
import HTTPServer
import PGBus
import Synchronization

/// One relay instance: the HTTP server, the LISTEN connection and the parts between them.
///
/// Lifecycle: `start()` registers the instance, starts listening and serving; `run()` waits
/// until `shutdown()` has drained the server (device sockets close 1012 "restart").
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
        /// SUPABASE_URL (the authorization server is SUPABASE_URL/auth/v1).
        public var supabaseURL: String?
        /// Browser origins allowed on /mcp besides the public URL.
        public var allowedOrigins: [String] = []
        /// Time between heartbeats (which also keep connected devices' last_seen_at fresh);
        /// every third one also reaps instances silent for 30 s.
        public var heartbeatInterval: Duration = .seconds(10)

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
    private let server: HTTPServer
    private let listener: PGListener
    private let database: RelayDatabase
    private let bus: RelayBus
    private let busTask = Mutex<Task<Void, Never>?>(nil)
    private let health: RelayHealth

    /// Builds an instance (nothing runs yet).
    public init(_ configuration: Configuration) throws {
        self.configuration = configuration
        let database = RelayDatabase(pool: PGPool(configuration: configuration.database, size: 8))
        self.database = database
        let authenticator = try Authenticator(hmacSecret: configuration.jwtSecret, jwks: configuration.jwks,
                                              issuer: configuration.issuer, database: database)
        let coordinator = LocateCoordinator(instance: configuration.instanceID, database: database)
        let hub = DeviceHub(instance: configuration.instanceID, database: database)
        let locateMetrics = LocateMetrics()
        let locator = LocateService(coordinator: coordinator, database: database, metrics: locateMetrics)
        let publicURL = configuration.publicURL
        let gate = AgentGate(authenticator: authenticator, publicURL: publicURL)
        let mcp = MCPHandler(gate: gate, locator: locator, database: database,
                             allowedOrigins: Set([configuration.publicURL] + configuration.allowedOrigins))
        let listener = PGListener(configuration: configuration.listenDatabase ?? configuration.database)
        self.listener = listener
        let health = RelayHealth(listener: listener, hub: hub, coordinator: coordinator, locates: locateMetrics)
        self.health = health
        let routes = RelayRoutes(authenticator: authenticator, locator: locator, hub: hub, publicURL: publicURL, mcp: mcp,
                                 authorizationServers: configuration.supabaseURL.map { [$0 + "/auth/v1"] } ?? [],
                                 settler: AnswerSettler(database: database), health: health, gate: gate)
        self.server = HTTPServer(host: configuration.host, port: configuration.port) { await routes.handle($0) }
        self.bus = RelayBus(coordinator: coordinator, hub: hub, authenticator: authenticator)
    }

    /// Registers the instance, waits until LISTEN is active, then serves. Returns the port.
    @discardableResult
    public func start() async throws -> Int {
        try await database.registerInstance(configuration.instanceID)
        let (ready, readyContinuation) = AsyncStream<Void>.makeStream()
        let listener = self.listener, bus = self.bus, database = self.database
        let instance = configuration.instanceID, interval = configuration.heartbeatInterval
        let task = Task {
            await withTaskGroup(of: Void.self) { group in
                group.addTask { await listener.run() }
                group.addTask { try? await bus.run(listener: listener) { readyContinuation.yield() } }
                group.addTask { await Self.beat(database: database, instance: instance, interval: interval, until: listener) }
            }
        }
        busTask.withLock { $0 = task }
        var iterator = ready.makeAsyncIterator()
        _ = await iterator.next()
        return try server.start()
    }

    /// Heartbeats (keeping this instance's devices' last_seen_at fresh) and reaps dead
    /// instances every third beat, until the listener stops. Database errors are retried
    /// at the next beat.
    private static func beat(database: RelayDatabase, instance: String, interval: Duration, until listener: PGListener) async {
        var beats = 0
        while listener.state != .stopped, !Task.isCancelled {
            try? await Task.sleep(for: interval)
            guard listener.state != .stopped, !Task.isCancelled else { return }
            _ = try? await database.heartbeat(instance)
            beats += 1
            if beats % 3 == 0 { _ = try? await database.reap() }
        }
    }

    /// Waits until the instance has stopped.
    public func run() async {
        await server.run()
        let task = busTask.withLock { $0 }
        await task?.value
    }

    /// Graceful stop: device sockets close 1012 "restart", waiting requests finish until
    /// `drainTimeout`, then the listener stops.
    public func shutdown(drainTimeout: Duration = .seconds(10)) async {
        health.startDraining()
        await server.shutdown(drainTimeout: drainTimeout, webSocketCloseCode: WebSocketCloseCode.serviceRestart, reason: "restart")
        listener.shutdown()
        busTask.withLock { $0 }?.cancel()  // wakes the heartbeat from its sleep
    }
}
