/// A service made of closures, for parts whose start, run and stop are a call each (a pool
/// whose stop is `shutdown()`, a server whose run is `run()`). Each closure left out does
/// what `Service`'s default does.
public struct ClosureService: Service {
    /// The service's name in the group's log lines.
    public let name: String
    private let starting: @Sendable () async throws -> Void
    private let running: (@Sendable () async throws -> Void)?
    private let stopping: @Sendable () async -> Void

    /// A service named `name`.
    /// - Parameters:
    ///   - start: brings up what later services need (default: nothing).
    ///   - run: runs until cancelled (default: waits for the cancellation).
    ///   - shutdown: the graceful stop, returning when done (default: nothing).
    public init(_ name: String, start: @escaping @Sendable () async throws -> Void = {},
                run: (@Sendable () async throws -> Void)? = nil, shutdown: @escaping @Sendable () async -> Void = {}) {
        self.name = name
        self.starting = start
        self.running = run
        self.stopping = shutdown
    }

    /// Calls `start`.
    public func start() async throws { try await starting() }

    /// Calls `run`, or waits for the cancellation.
    public func run() async throws {
        if let running { try await running() } else { await untilCancelled() }
    }

    /// Calls `shutdown`.
    public func shutdown() async { await stopping() }
}
