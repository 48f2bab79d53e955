/// The listener's connection lifecycle as a value: each event returns the action the
/// listener's thread performs. No I/O here, so every transition is testable.
struct ListenerStateMachine {
    /// Where the listener is.
    enum State: Equatable {
        /// Not started.
        case idle
        /// Connecting; `attempt` counts failures since the last good connection.
        case connecting(attempt: Int)
        /// Connected with every wanted channel LISTENed.
        case listening
        /// Waiting before the next connection attempt.
        case backingOff(attempt: Int)
        /// Shut down for good.
        case stopped
    }

    /// What the thread must do next.
    enum Action: Equatable {
        /// Open a new connection.
        case connect
        /// LISTEN every wanted channel on the fresh connection, then tell every consumer
        /// to resync.
        case listenAllAndResync
        /// Close the connection (if any) and wait this long, then report `backoffElapsed`.
        case closeAndWait(Duration)
        /// Send the heartbeat query.
        case sendHeartbeat
        /// LISTEN the channels the server lost, then tell every consumer to resync.
        case relistenAndResync
        /// Nothing to do; keep polling.
        case none
        /// Close the connection and end the thread.
        case close
    }

    private(set) var state: State = .idle
    let backoff: PGBackoff
    let random: () -> Double

    init(backoff: PGBackoff, random: @escaping () -> Double = { Double.random(in: 0...1) }) {
        self.backoff = backoff
        self.random = random
    }

    /// The listener starts.
    mutating func start() -> Action {
        guard state == .idle else { return .none }
        state = .connecting(attempt: 0)
        return .connect
    }

    /// The connection is up.
    mutating func connected() -> Action {
        guard case .connecting = state else { return .none }
        state = .listening
        return .listenAllAndResync
    }

    /// Connecting failed, or the connection broke (also mid-LISTEN or in a heartbeat).
    mutating func connectionLost() -> Action {
        switch state {
        case .connecting(let attempt):
            state = .backingOff(attempt: attempt + 1)
            return .closeAndWait(backoff.delay(attempt: attempt, random: random()))
        case .listening:
            // A good connection broke: retry at once, backoff starts if that fails too.
            state = .connecting(attempt: 0)
            return .connect
        case .idle, .backingOff, .stopped:
            return .none
        }
    }

    /// The wait before reconnecting is over.
    mutating func backoffElapsed() -> Action {
        guard case .backingOff(let attempt) = state else { return .none }
        state = .connecting(attempt: attempt)
        return .connect
    }

    /// The heartbeat interval passed while listening.
    mutating func heartbeatDue() -> Action {
        state == .listening ? .sendHeartbeat : .none
    }

    /// The heartbeat answered with the channels the server has LISTENed.
    mutating func heartbeatAnswered(serverChannels: Set<String>, expected: Set<String>) -> Action {
        guard state == .listening else { return .none }
        return expected.isSubset(of: serverChannels) ? .none : .relistenAndResync
    }

    /// The heartbeat got no answer in time: the connection is presumed dead.
    mutating func heartbeatTimedOut() -> Action {
        connectionLost()
    }

    /// Shutdown was requested.
    mutating func shutdown() -> Action {
        guard state != .stopped else { return .none }
        state = .stopped
        return .close
    }
}
