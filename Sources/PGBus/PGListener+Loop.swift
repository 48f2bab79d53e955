import CLibPQ
import Foundation

/// The listener's thread: performs the state machine's actions on one libpq connection.
extension PGListener {
    /// The connection and what is LISTENed on it; owned by the listener's thread.
    private struct Session {
        var connection: OpaquePointer?
        var active: Set<String> = []

        mutating func close() {
            if let connection { PQfinish(connection) }
            connection = nil
            active = []
        }
    }

    func loop() {
        var machine = ListenerStateMachine(backoff: backoff)
        var session = Session()
        var nextHeartbeat = ContinuousClock.now + heartbeatInterval
        var everConnected = false
        var action = machine.start()

        while true {
            if action != .close, shared.withLock({ $0.stopRequested }) { action = machine.shutdown() }
            switch action {
            case .connect:
                publish(.connecting)
                if let connection = try? PGConnect.openHandle(configuration) {
                    session.connection = connection
                    if everConnected { shared.withLock { $0.reconnects += 1 } }
                    everConnected = true
                    action = machine.connected()
                } else {
                    action = machine.connectionLost()
                }

            case .listenAllAndResync, .relistenAndResync:
                do {
                    if action == .relistenAndResync { session.active = [] }
                    try reconcile(&session)
                    resync(onlyPending: false)
                    publish(.listening)
                    nextHeartbeat = ContinuousClock.now + heartbeatInterval
                    action = .none
                } catch {
                    session.close()
                    action = machine.connectionLost()
                }

            case .closeAndWait(let delay):
                session.close()
                publish(.reconnecting)
                let deadline = ContinuousClock.now + delay
                while ContinuousClock.now < deadline, !shared.withLock({ $0.stopRequested }) {
                    if wake.wait(timeoutMilliseconds: milliseconds(until: deadline)) { wake.drain() }
                }
                action = machine.backoffElapsed()

            case .sendHeartbeat:
                do {
                    let channels = try heartbeat(&session)
                    nextHeartbeat = ContinuousClock.now + heartbeatInterval
                    action = machine.heartbeatAnswered(serverChannels: channels, expected: session.active)
                } catch {
                    session.close()
                    action = machine.heartbeatTimedOut()
                }

            case .none:
                action = pollOnce(&machine, &session, nextHeartbeat: nextHeartbeat)

            case .close:
                session.close()
                publish(.stopped)
                let sinks = shared.withLock { shared in
                    defer { shared.consumers.removeAll() }
                    return shared.consumers.values.map(\.sink)
                }
                sinks.forEach { $0.finish() }
                return
            }
        }
    }

    /// Waits for notifications, a consumer change or the heartbeat, and handles one of them.
    private func pollOnce(_ machine: inout ListenerStateMachine, _ session: inout Session,
                          nextHeartbeat: ContinuousClock.Instant) -> ListenerStateMachine.Action {
        guard let connection = session.connection else { return machine.connectionLost() }
        let socketReady: Bool
        do {
            socketReady = try PGSocket.wait(connection, for: .read,
                                            timeoutMilliseconds: milliseconds(until: nextHeartbeat),
                                            wakeFD: wake.readFD)
        } catch {
            session.close()
            return machine.connectionLost()
        }
        if socketReady {
            if PQconsumeInput(connection) == 0 {
                session.close()
                return machine.connectionLost()
            }
            dispatchNotifications(connection)
        }
        if wake.wait(timeoutMilliseconds: 0) {
            wake.drain()
            if shared.withLock({ $0.stopRequested }) { return machine.shutdown() }
            do {
                try reconcile(&session)
                resync(onlyPending: true)
            } catch {
                session.close()
                return machine.connectionLost()
            }
        }
        return ContinuousClock.now >= nextHeartbeat ? machine.heartbeatDue() : .none
    }

    /// LISTENs what consumers want and UNLISTENs what none wants any more.
    private func reconcile(_ session: inout Session) throws {
        guard let connection = session.connection else { throw PGError(.connectionClosed) }
        let wanted = shared.withLock { $0.consumers.values.reduce(into: Set<String>()) { $0.formUnion($1.channels) } }
        let commands = wanted.subtracting(session.active).sorted().map { "LISTEN \(quoted($0));" }
            + session.active.subtracting(wanted).sorted().map { "UNLISTEN \(quoted($0));" }
        if !commands.isEmpty {
            _ = try command(connection, commands.joined(separator: " "))
        }
        session.active = wanted
        shared.withLock { $0.activeChannels = wanted }
    }

    /// Asks the server which channels this session LISTENs on.
    private func heartbeat(_ session: inout Session) throws -> Set<String> {
        guard let connection = session.connection else { throw PGError(.connectionClosed) }
        let result = try command(connection, "select pg_listening_channels()")
        return Set(result.rows.compactMap { $0.values.first ?? nil })
    }

    /// Runs a simple-protocol command within the heartbeat timeout, dispatching any
    /// notifications that arrive meanwhile.
    private func command(_ connection: OpaquePointer, _ sql: String) throws -> PGQueryResult {
        guard PQsendQuery(connection, sql) == 1 else { throw PGSocket.connectionError(connection) }
        let timeout = Int32(clamping: heartbeatTimeout.components.seconds * 1000
            + heartbeatTimeout.components.attoseconds / 1_000_000_000_000_000)
        let results = try PGSocket.collectResults(connection, timeoutMilliseconds: timeout) {
            dispatchNotifications(connection)
        }
        defer { results.forEach { PQclear($0) } }
        dispatchNotifications(connection)
        if let failure = results.lazy.compactMap(PGSocket.resultError).first { throw failure }
        return results.last.map(PGSocket.decode) ?? PGQueryResult(rows: [], affectedRows: 0)
    }

    private func dispatchNotifications(_ connection: OpaquePointer) {
        while let raw = PQnotifies(connection) {
            let notification = PGNotification(channel: String(cString: raw.pointee.relname),
                                              payload: String(cString: raw.pointee.extra),
                                              pid: raw.pointee.be_pid)
            PQfreemem(raw)
            let sinks = shared.withLock { shared in
                shared.notificationsReceived += 1
                return shared.consumers.values.filter { $0.channels.contains(notification.channel) }.map(\.sink)
            }
            sinks.forEach { $0.yield(.notification(notification)) }
        }
    }

    /// Sends `.resync` to every consumer, or only to those waiting for their first one.
    private func resync(onlyPending: Bool) {
        let sinks = shared.withLock { shared in
            var sinks: [PGNotificationSink] = []
            for (id, consumer) in shared.consumers where consumer.pending || !onlyPending {
                shared.consumers[id]?.pending = false
                sinks.append(consumer.sink)
            }
            return sinks
        }
        sinks.forEach { $0.yield(.resync) }
    }

    private func publish(_ state: PGListenerState) {
        shared.withLock { $0.state = state }
    }

    private func quoted(_ channel: String) -> String {
        "\"" + channel.replacingOccurrences(of: "\"", with: "\"\"") + "\""
    }

    private func milliseconds(until deadline: ContinuousClock.Instant) -> Int32 {
        let remaining = deadline - ContinuousClock.now
        if remaining <= .zero { return 0 }
        let (seconds, attoseconds) = remaining.components
        return Int32(clamping: seconds * 1000 + attoseconds / 1_000_000_000_000_000 + 1)
    }
}
