/// A bounded pool of connections.
///
/// At most `size` connections exist; they are opened on demand. A caller that finds none
/// free waits (first come, first served) up to `acquireTimeout`, then gets `poolTimeout`.
/// A connection that broke while leased is discarded and a replacement opened for the next
/// waiter. `health` reports the counts for /readyz and metrics. `shutdown()` closes idle
/// connections and fails waiters; leased connections close when returned.
public actor PGPool {
    /// Default number of connections: enough for a relay's short function calls.
    public static let defaultSize = 4
    /// Default wait for a free connection before `poolTimeout`.
    public static let defaultAcquireTimeout = Duration.seconds(10)

    private let configuration: PGConfiguration
    private let size: Int
    private let acquireTimeout: Duration
    private var idle: [PGConnection] = []
    private var open = 0
    private var waiters: [Waiter] = []
    private var nextWaiterID: UInt64 = 0
    private var isShutDown = false
    private var discarded = 0
    private var failedConnects = 0

    private struct Waiter {
        let id: UInt64
        let continuation: CheckedContinuation<PGConnection, Error>
        let timeout: Task<Void, Never>
    }

    /// Creates a pool; no connection is opened until the first use.
    /// - Parameters:
    ///   - configuration: where to connect.
    ///   - size: the most connections open at once (at least 1).
    ///   - acquireTimeout: how long a caller waits for a free connection.
    public init(configuration: PGConfiguration, size: Int = PGPool.defaultSize,
                acquireTimeout: Duration = PGPool.defaultAcquireTimeout) {
        self.configuration = configuration
        self.size = max(1, size)
        self.acquireTimeout = acquireTimeout
    }

    /// Leases a connection for `body` and returns it afterwards (discarding it if broken).
    public nonisolated func withConnection<T: Sendable>(_ body: (PGConnection) async throws -> T) async throws -> T {
        let connection = try await acquire()
        do {
            let value = try await body(connection)
            await release(connection)
            return value
        } catch {
            await release(connection)
            throw error
        }
    }

    /// Runs one statement on a leased connection.
    @discardableResult
    public nonisolated func query(_ sql: String, _ parameters: [(any PGEncodable)?] = []) async throws -> PGQueryResult {
        try await withConnection { try await $0.query(sql, parameters) }
    }

    /// What the pool holds now.
    public var health: PGPoolHealth {
        PGPoolHealth(size: size, open: open, idle: idle.count, waiting: waiters.count,
                     discarded: discarded, failedConnects: failedConnects, isShutDown: isShutDown)
    }

    /// Closes idle connections, fails waiters with `shutDown`, refuses new leases.
    public func shutdown() async {
        isShutDown = true
        for waiter in waiters {
            waiter.timeout.cancel()
            waiter.continuation.resume(throwing: PGError(.shutDown, detail: "pool shut down"))
        }
        waiters.removeAll()
        let closing = idle
        idle.removeAll()
        open -= closing.count
        for connection in closing { await connection.close() }
    }

    private func acquire() async throws -> PGConnection {
        guard !isShutDown else { throw PGError(.shutDown, detail: "pool shut down") }
        while let connection = idle.popLast() {
            if connection.isUsable { return connection }
            open -= 1
            discarded += 1
        }
        if open < size {
            open += 1
            do {
                return try await PGConnection.connect(configuration)
            } catch {
                open -= 1
                failedConnects += 1
                throw error
            }
        }
        nextWaiterID += 1
        let id = nextWaiterID
        let timeout = acquireTimeout
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { continuation in
                let timer = Task { [weak self] in
                    try? await Task.sleep(for: timeout)
                    if !Task.isCancelled { await self?.failWaiter(id, PGError(.poolTimeout, detail: "no free connection")) }
                }
                waiters.append(Waiter(id: id, continuation: continuation, timeout: timer))
            }
        } onCancel: {
            Task { await self.failWaiter(id, CancellationError()) }
        }
    }

    private func failWaiter(_ id: UInt64, _ error: Error) {
        guard let index = waiters.firstIndex(where: { $0.id == id }) else { return }
        let waiter = waiters.remove(at: index)
        waiter.timeout.cancel()
        waiter.continuation.resume(throwing: error)
    }

    private func release(_ connection: PGConnection) async {
        guard connection.isUsable, !isShutDown else {
            open -= 1
            if !connection.isUsable { discarded += 1 }
            await connection.close()
            await replaceForWaiter()
            return
        }
        if waiters.isEmpty {
            idle.append(connection)
        } else {
            let waiter = waiters.removeFirst()
            waiter.timeout.cancel()
            waiter.continuation.resume(returning: connection)
        }
    }

    /// Opens a replacement for a discarded connection when someone is waiting.
    private func replaceForWaiter() async {
        guard !waiters.isEmpty, open < size, !isShutDown else { return }
        open += 1
        do {
            let connection = try await PGConnection.connect(configuration)
            await release(connection)
        } catch {
            open -= 1
            failedConnects += 1
            if !waiters.isEmpty {
                let waiter = waiters.removeFirst()
                waiter.timeout.cancel()
                waiter.continuation.resume(throwing: error)
            }
        }
    }
}

/// A snapshot of a pool's state.
public struct PGPoolHealth: Sendable, Equatable {
    /// The most connections the pool opens.
    public let size: Int
    /// Connections open or opening now.
    public let open: Int
    /// Open connections not leased.
    public let idle: Int
    /// Callers waiting for a connection.
    public let waiting: Int
    /// Connections thrown away because they broke, since the pool was made.
    public let discarded: Int
    /// Connection attempts that failed, since the pool was made.
    public let failedConnects: Int
    /// Whether `shutdown()` was called.
    public let isShutDown: Bool
}
