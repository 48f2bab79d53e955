import Loop

/// A bounded pool of connections.
///
/// Two ways in: `withConnection` (and `query`) lease a connection for one task at a time,
/// which transactions need; `send` runs a single statement on one of up to
/// `sharedConnections` connections that are never leased, where the statements of many
/// tasks are pipelined together (the fast path for autocommit calls).
///
/// The connections run on `loop` when one is given (say, the HTTP server's, so that a
/// handler's queries never leave its thread), else each on a loop of its own.
/// At most `size` connections exist; they are opened on demand. A caller that finds none
/// free waits (first come, first served) up to `acquireTimeout`, then gets `poolTimeout`.
/// A connection that broke while leased is discarded and a replacement opened for the next
/// waiter. Failed connects back off (jittered, capped at `connectBackoff.maximum`): until
/// the next attempt is due every caller that needs a new connection fails at once with
/// `connectionFailed`, so a server that refuses logins (down, or a standby that is still
/// read-only under `target_session_attrs=read-write`) gets one login per backoff step, not
/// one per caller. `health` reports the counts for /readyz and metrics. `shutdown()` closes idle
/// connections and fails waiters; leased connections close when returned.
public actor PGPool {
    /// Default number of connections: enough for a relay's short function calls.
    public static let defaultSize = 4
    /// Default bound on the statements waiting on one shared connection.
    public static let defaultMaximumOutstanding = 1_000
    /// Default wait for a free connection before `poolTimeout`.
    public static let defaultAcquireTimeout = Duration.seconds(10)
    /// Default backoff between failed connects: a quarter second at first, at most 5 s.
    public static let defaultConnectBackoff = PGBackoff(initial: .milliseconds(250), maximum: .seconds(5))

    private let configuration: PGConfiguration
    private let loop: EventLoop?
    private let size: Int
    private let acquireTimeout: Duration
    private var idle: [PGConnection] = []
    private var open = 0
    private var waiters: [Waiter] = []
    private var nextWaiterID: UInt64 = 0
    private var isShutDown = false
    private var discarded = 0
    private var failedConnects = 0
    private var refusedAfterShutdown = 0
    private let sharedLimit: Int
    private let maximumOutstanding: Int
    private let connectBackoff: PGBackoff
    /// Connects that failed in a row, and when the next one may be tried.
    private var failedInARow = 0
    private var nextConnectAt: ContinuousClock.Instant?
    /// Why the last connect failed: callers refused while connects back off get it again.
    private var lastConnectFailure: PGError?
    private var shared: [PGConnection] = []
    private var sharedOpening: Task<PGConnection, Error>?

    private struct Waiter {
        let id: UInt64
        let continuation: CheckedContinuation<PGConnection, Error>
    }

    /// Creates a pool; no connection is opened until the first use.
    /// - Parameters:
    ///   - configuration: where to connect.
    ///   - size: the most connections open at once (at least 1).
    ///   - acquireTimeout: how long a caller waits for a free connection.
    ///   - loop: the running loop to drive the connections; nil gives each its own.
    ///   - sharedConnections: the most connections `send` pipelines on (besides `size`).
    ///   - maximumOutstanding: statements that may wait on one shared connection; past it
    ///     `send` fails at once with `poolTimeout` rather than queue without bound.
    ///   - connectBackoff: how long to wait after a failed connect before the next.
    public init(configuration: PGConfiguration, size: Int = PGPool.defaultSize,
                acquireTimeout: Duration = PGPool.defaultAcquireTimeout, loop: EventLoop? = nil,
                sharedConnections: Int = 1, maximumOutstanding: Int = PGPool.defaultMaximumOutstanding,
                connectBackoff: PGBackoff = PGPool.defaultConnectBackoff) {
        self.connectBackoff = connectBackoff
        self.sharedLimit = max(1, sharedConnections)
        self.maximumOutstanding = max(1, maximumOutstanding)
        self.configuration = configuration
        self.loop = loop
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

    /// Runs one statement (autocommit) on a shared connection, pipelined with the
    /// statements of other tasks: the one with the fewest statements outstanding, or a new
    /// one while fewer than `sharedConnections` are open and all are busy.
    @discardableResult
    public nonisolated func send(_ sql: String, _ parameters: [(any PGEncodable)?] = []) async throws -> PGQueryResult {
        try await sharedConnection().query(sql, parameters)
    }

    private func sharedConnection() async throws -> PGConnection {
        guard !isShutDown else { throw refuse() }
        let before = shared.count
        shared.removeAll { !$0.isUsable }
        discarded += before - shared.count
        let least = shared.min { $0.outstanding < $1.outstanding }
        if let least, least.outstanding == 0 || shared.count >= sharedLimit || sharedOpening != nil {
            guard least.outstanding < maximumOutstanding else {
                throw PGError(.poolTimeout, detail: "every shared connection has \(maximumOutstanding) statements waiting")
            }
            return least
        }
        if let opening = sharedOpening { return try await opening.value }
        // Owner: the pool, in `sharedOpening`: every caller meanwhile awaits this one opening,
        // and so does `shutdown()`; a connection it opens after shutdown is closed below.
        let opening = Task { try await self.openConnection() }
        sharedOpening = opening
        defer { sharedOpening = nil }
        let connection = try await opening.value
        if isShutDown {
            await connection.close()
            throw PGError(.shutDown, detail: "pool shut down")
        }
        shared.append(connection)
        return connection
    }

    /// Opens a connection, unless connects are backing off after failures (then fails at
    /// once without a login).
    private func openConnection() async throws -> PGConnection {
        if let due = nextConnectAt, ContinuousClock.now < due {
            throw lastConnectFailure ?? PGError(.connectionFailed, detail: "backing off after \(failedInARow) failed connects")
        }
        do {
            let connection = try await PGConnection.connect(configuration, on: loop)
            failedInARow = 0
            nextConnectAt = nil
            lastConnectFailure = nil
            return connection
        } catch {
            failedConnects += 1
            nextConnectAt = .now + connectBackoff.delay(attempt: failedInARow, random: .random(in: 0...1))
            failedInARow += 1
            lastConnectFailure = error as? PGError
            throw error
        }
    }

    /// What the pool holds now.
    public var health: PGPoolHealth {
        PGPoolHealth(size: size, open: open, idle: idle.count { $0.isUsable }, waiting: waiters.count,
                     sharedOutstanding: shared.reduce(0) { $0 + $1.outstanding },
                     discarded: discarded, failedConnects: failedConnects, isShutDown: isShutDown,
                     refusedAfterShutdown: refusedAfterShutdown)
    }

    /// Closes idle connections, fails waiters with `shutDown`, refuses new leases, and
    /// returns once a shared connection being opened has been closed too.
    public func shutdown() async {
        isShutDown = true
        for waiter in waiters {
            waiter.continuation.resume(throwing: PGError(.shutDown, detail: "pool shut down"))
        }
        waiters.removeAll()
        let sharing = shared
        shared.removeAll()
        for connection in sharing { await connection.close() }
        let closing = idle
        idle.removeAll()
        open -= closing.count
        for connection in closing { await connection.close() }
        // The opening's task ends with its connect; the caller awaiting it closes what it
        // opened (`sharedConnection`).
        _ = try? await sharedOpening?.value
    }

    /// A statement or lease asked for after `shutdown()`: counted (an owner that stops its
    /// users before its pool never gets one) and refused.
    private func refuse() -> PGError {
        refusedAfterShutdown += 1
        return PGError(.shutDown, detail: "pool shut down")
    }

    private func acquire() async throws -> PGConnection {
        guard !isShutDown else { throw refuse() }
        while let connection = idle.popLast() {
            if connection.isUsable { return connection }
            open -= 1
            discarded += 1
        }
        if open < size {
            open += 1
            do {
                return try await openConnection()
            } catch {
                open -= 1
                throw error
            }
        }
        nextWaiterID += 1
        let id = nextWaiterID
        let timeout = acquireTimeout
        // The waiter's timer is a child task: it fails the waiter after `acquireTimeout`, or
        // at once when the caller's task is cancelled, and is cancelled itself (and awaited)
        // once the waiter has its connection. A waiter already served is not found.
        return try await withThrowingTaskGroup(of: Void.self) { timer in
            timer.addTask {
                let timedOut = (try? await Task.sleep(for: timeout)) != nil
                await self.failWaiter(id, timedOut ? PGError(.poolTimeout, detail: "no free connection") : CancellationError())
            }
            defer { timer.cancelAll() }
            return try await withCheckedThrowingContinuation { continuation in
                waiters.append(Waiter(id: id, continuation: continuation))
            }
        }
    }

    private func failWaiter(_ id: UInt64, _ error: Error) {
        guard let index = waiters.firstIndex(where: { $0.id == id }) else { return }
        waiters.remove(at: index).continuation.resume(throwing: error)
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
            waiters.removeFirst().continuation.resume(returning: connection)
        }
    }

    /// Opens a replacement for a discarded connection when someone is waiting.
    private func replaceForWaiter() async {
        guard !waiters.isEmpty, open < size, !isShutDown else { return }
        open += 1
        do {
            let connection = try await openConnection()
            await release(connection)
        } catch {
            open -= 1
            if !waiters.isEmpty { waiters.removeFirst().continuation.resume(throwing: error) }
        }
    }
}

/// A snapshot of a pool's state.
public struct PGPoolHealth: Sendable, Equatable {
    /// The most connections the pool opens.
    public let size: Int
    /// Connections open or opening now.
    public let open: Int
    /// Open connections not leased and still usable (one whose server went away counts
    /// once the loop has seen its socket close, before the next lease discards it).
    public let idle: Int
    /// Callers waiting for a connection.
    public let waiting: Int
    /// Statements submitted with `send` on the shared connections and not yet answered.
    public let sharedOutstanding: Int
    /// Connections thrown away because they broke, since the pool was made.
    public let discarded: Int
    /// Connection attempts that failed, since the pool was made.
    public let failedConnects: Int
    /// Whether `shutdown()` was called.
    public let isShutDown: Bool
    /// Statements and leases asked for after `shutdown()` (each refused with `shutDown`).
    public let refusedAfterShutdown: Int
}
