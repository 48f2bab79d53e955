import Foundation
import Loop
import Synchronization

/// LISTEN/NOTIFY on one dedicated connection per process, surviving reconnects.
///
/// Lifecycle: create it, start `run()` in a task you own, consume with
/// `listen(on:_:)`, end with `shutdown()` (or by cancelling the task running `run()`).
///
/// Invariants:
/// - One connection, never inside a transaction, used for nothing but LISTEN and the
///   heartbeat. Point it directly at the primary: a transaction-mode pooler cannot carry
///   LISTEN.
/// - One LISTEN per channel however many consumers; UNLISTEN when the last consumer of a
///   channel leaves its scope.
/// - After every (re)connect the channels are LISTENed again and every consumer gets
///   `.resync`: notifications are hints, the tables are the truth.
/// - A heartbeat (`pg_listening_channels()`, every `heartbeatInterval`, answered within
///   `heartbeatTimeout`) detects a silent connection and a server that forgot a LISTEN.
/// - Reconnects back off exponentially with jitter (about 1 s to 30 s).
/// - Notifications reach each consumer in the order the server delivered them.
/// - The connection is driven by an event loop — the one given (shared with the rest of
///   the process, so a notification reaches a consumer on that loop without a thread
///   switch) or one of its own — and never blocks it.
public final class PGListener: Sendable {
    /// Default time between heartbeats.
    public static let defaultHeartbeatInterval = Duration.seconds(10)
    /// Default time a heartbeat may take before the connection counts as dead.
    public static let defaultHeartbeatTimeout = Duration.seconds(5)

    let configuration: PGConfiguration
    let heartbeatInterval: Duration
    let heartbeatTimeout: Duration
    let backoff: PGBackoff
    let shared = Mutex(Shared())
    private let sharedLoop: EventLoop?
    /// The driver of the current `run()`, for `shutdown()` and consumer changes.
    private let driver = Mutex<PGListenerDriver?>(nil)

    /// State shared between consumers (any task) and the listener's thread.
    struct Shared {
        var consumers: [UInt64: Consumer] = [:]
        var nextConsumerID: UInt64 = 0
        var state: PGListenerState = .idle
        var stopRequested = false
        var notificationsReceived = 0
        var reconnects = 0
        /// Why the last connect failed or the connection was lost (nil once listening).
        var lastFailure: PGError?
        /// The channels LISTENed on the current connection, as last reconciled.
        var activeChannels: Set<String> = []
    }

    struct Consumer {
        let channels: Set<String>
        let sink: PGNotificationSink
        /// Waiting for its first `.resync` (its channels are not all LISTENed yet).
        var pending: Bool
    }

    /// Creates a listener; nothing connects until `run()`.
    /// - Parameters:
    ///   - configuration: a direct connection to the primary (not a transaction pooler).
    ///   - heartbeatInterval: time between liveness checks.
    ///   - heartbeatTimeout: how long a liveness check may take.
    ///   - backoff: reconnect delays.
    ///   - loop: the running loop to drive the connection; nil runs one of its own.
    public init(configuration: PGConfiguration,
                heartbeatInterval: Duration = PGListener.defaultHeartbeatInterval,
                heartbeatTimeout: Duration = PGListener.defaultHeartbeatTimeout,
                backoff: PGBackoff = .standard, loop: EventLoop? = nil) {
        self.configuration = configuration
        self.heartbeatInterval = heartbeatInterval
        self.heartbeatTimeout = heartbeatTimeout
        self.backoff = backoff
        self.sharedLoop = loop
    }

    /// Where the listener is now (for /readyz).
    public var state: PGListenerState { shared.withLock { $0.state } }

    /// Notifications received since start, over all reconnects.
    public var notificationsReceived: Int { shared.withLock { $0.notificationsReceived } }

    /// Why the listener is not listening: the last failed connect or loss (nil while
    /// listening, and before the first attempt ends).
    public var lastFailure: PGError? { shared.withLock { $0.state == .listening ? nil : $0.lastFailure } }

    /// Times the connection was re-established after a loss.
    public var reconnects: Int { shared.withLock { $0.reconnects } }

    /// The channels LISTENed on the server now (one LISTEN per channel, whatever the
    /// number of consumers).
    public var listeningChannels: Set<String> { shared.withLock { $0.activeChannels } }

    /// Runs the listener until `shutdown()` or until the calling task is cancelled. The
    /// work happens on the loop; this task only waits for it.
    public func run() async {
        let ownLoop = sharedLoop == nil
        guard let loop = try? sharedLoop ?? EventLoop.start(name: "pgbus-listener") else {
            publish(.stopped)
            return
        }
        let driver = PGListenerDriver(listener: self, loop: loop)
        self.driver.withLock { $0 = driver }
        let connecting = await withTaskCancellationHandler {
            await withCheckedContinuation { (done: CheckedContinuation<Task<Void, Never>?, Never>) in
                loop.execute { driver.start { done.resume(returning: $0) } }
            }
        } onCancel: {
            shutdown()
        }
        // A connect under way when it stopped: its thread ends within the connect timeout,
        // and the connection it may bring is closed on the loop (which still runs).
        await connecting?.value
        self.driver.withLock { $0 = nil }
        if ownLoop { loop.stop() }
    }

    /// Stops the listener: consumers' sequences end, the connection closes, `run()` returns.
    public func shutdown() {
        shared.withLock { $0.stopRequested = true }
        if let driver = driver.withLock({ $0 }) { driver.loop.execute { driver.stop() } }
    }

    /// Tells the running driver that the consumers changed.
    private func consumersChanged() {
        if let driver = driver.withLock({ $0 }) { driver.loop.execute { driver.consumersChanged() } }
    }

    /// LISTENs on `channels` for the duration of `consume`.
    ///
    /// The sequence first yields `.resync` once LISTEN is active for all the channels (read
    /// your tables then), then notifications in order, and `.resync` again after any
    /// reconnect or overflow. When `consume` returns or throws, channels no other consumer
    /// wants are UNLISTENed.
    /// - Parameters:
    ///   - channels: channel names, used exactly (case and quotes preserved).
    ///   - consume: iterates the events; runs in the caller's task.
    public func listen<R: Sendable>(on channels: [String],
                                    _ consume: (PGNotificationSequence) async throws -> R) async throws -> R {
        let sink = PGNotificationSink()
        let id = shared.withLock { shared -> UInt64? in
            guard !shared.stopRequested, shared.state != .stopped else { return nil }
            shared.nextConsumerID += 1
            shared.consumers[shared.nextConsumerID] = Consumer(channels: Set(channels), sink: sink, pending: true)
            return shared.nextConsumerID
        }
        guard let id else { throw PGError(.shutDown, detail: "listener stopped") }
        consumersChanged()
        defer {
            shared.withLock { _ = $0.consumers.removeValue(forKey: id) }
            sink.finish()
            consumersChanged()
        }
        return try await consume(PGNotificationSequence(sink: sink))
    }
}

/// The listener's state, as /readyz reports it.
public enum PGListenerState: Sendable, Equatable {
    /// `run()` has not started.
    case idle
    /// Opening a connection (first time or after a loss).
    case connecting
    /// Connected, every wanted channel LISTENed.
    case listening
    /// Waiting to retry after a failed connection attempt.
    case reconnecting
    /// Shut down.
    case stopped

    /// True only while notifications can arrive.
    public var isListening: Bool { self == .listening }
}
