import CLibPQ
import CSystem
import Foundation
import Loop

/// The listener's connection, driven by an event loop: performs the state machine's
/// actions without ever blocking the loop. Connecting happens on a short-lived thread
/// (`PGConnect.openOffLoop`); LISTEN/UNLISTEN and the heartbeat go out as non-blocking
/// commands, one at a time, each with `heartbeatTimeout` on a loop timer; notifications are
/// read and handed to the consumers when the socket is readable. Everything here runs on
/// the loop thread.
final class PGListenerDriver: EventLoopSource, @unchecked Sendable {
    private let listener: PGListener
    let loop: EventLoop
    private var machine: ListenerStateMachine
    private var connection: OpaquePointer?
    private var fd: Int32 = -1
    private var token: UInt64?
    /// The channels LISTENed on the current connection.
    private var active: Set<String> = []
    private var everConnected = false
    /// Bumped at every connect and close, so a late connect result is dropped.
    private var generation = 0
    private var command: Command?
    private var results: [OpaquePointer] = []
    private var commandTimer: LoopTimer?
    private var heartbeatTimer: LoopTimer?
    private var backoffTimer: LoopTimer?
    /// Consumers changed while a command was out: reconcile once it is answered.
    private var reconcileWanted = false
    /// The last connect's task (its thread's wait), handed to `finished` at the stop, so that
    /// `PGListener.run()` returns only once it has ended.
    private var connecting: Task<Void, Never>?
    private var finished: ((Task<Void, Never>?) -> Void)?

    /// What the command in flight is for.
    private enum Command {
        case reconcile(wanted: Set<String>, resyncAll: Bool)
        case heartbeat
    }

    init(listener: PGListener, loop: EventLoop) {
        self.listener = listener
        self.loop = loop
        self.machine = ListenerStateMachine(backoff: listener.backoff)
    }

    /// Starts the state machine; `finished` runs once the listener has stopped, with the task
    /// of a connect still under way (its connection is closed when it arrives).
    func start(finished: @escaping (Task<Void, Never>?) -> Void) {
        self.finished = finished
        if listener.shared.withLock({ $0.stopRequested }) {
            perform(machine.shutdown())
        } else {
            perform(machine.start())
        }
    }

    /// `shutdown()` was called (any thread hops here).
    func stop() {
        perform(machine.shutdown())
    }

    /// A consumer came or went: LISTEN/UNLISTEN what changed and resync newcomers.
    func consumersChanged() {
        guard connection != nil, case .listening = machine.state else { return }  // the next connect listens to all
        if command != nil {
            reconcileWanted = true
        } else {
            reconcile(resyncAll: false)
        }
    }

    private func perform(_ action: ListenerStateMachine.Action) {
        switch action {
        case .connect:
            listener.publish(.connecting)
            generation += 1
            let attempt = generation, configuration = listener.configuration
            // Owner: the driver, in `connecting` (`PGListener.run()` awaits it after the
            // stop), and through `attempt`: a connection that opens after a newer attempt or
            // a stop is closed in `connected`, never used.
            connecting = Task {
                let result: Result<PGConnect.OwnedHandle, Error>
                do { result = .success(try await PGConnect.openOffLoop(configuration)) } catch { result = .failure(error) }
                loop.execute { [self] in connected(result, attempt: attempt) }
            }
        case .listenAllAndResync:
            reconcile(resyncAll: true)
        case .relistenAndResync:
            active = []
            reconcile(resyncAll: true)
        case .closeAndWait(let delay):
            closeConnection()
            listener.publish(.reconnecting)
            backoffTimer = loop.schedule(after: delay) { [self] in perform(machine.backoffElapsed()) }
        case .sendHeartbeat:
            send("select pg_listening_channels()", as: .heartbeat)
        case .none:
            break
        case .close:
            closeConnection()
            backoffTimer?.cancel()
            listener.publish(.stopped)
            let sinks = listener.shared.withLock { shared in
                defer { shared.consumers.removeAll() }
                return shared.consumers.values.map(\.sink)
            }
            sinks.forEach { $0.finish() }
            finished?(connecting)
            finished = nil
            connecting = nil
        }
    }

    private func connected(_ result: Result<PGConnect.OwnedHandle, Error>, attempt: Int) {
        guard attempt == generation, case .connecting = machine.state else {
            if case .success(let handle) = result { PQfinish(handle.pointer) }  // stopped meanwhile
            return
        }
        guard case .success(let handle) = result else {
            if case .failure(let error) = result {
                listener.shared.withLock { $0.lastFailure = error as? PGError ?? PGError(.connectionFailed) }
            }
            perform(machine.connectionLost())
            return
        }
        connection = handle.pointer
        fd = PQsocket(handle.pointer)
        do {
            token = try loop.register(fd, events: WB_EPOLLIN, source: self)
        } catch {
            lost()
            return
        }
        if everConnected { listener.shared.withLock { $0.reconnects += 1 } }
        everConnected = true
        perform(machine.connected())
    }

    /// The connection broke (or a command failed or timed out).
    private func lost() {
        listener.shared.withLock { $0.lastFailure = PGError(.connectionClosed) }
        closeConnection()
        perform(machine.connectionLost())
    }

    private func closeConnection() {
        generation += 1
        commandTimer?.cancel()
        heartbeatTimer?.cancel()
        commandTimer = nil
        heartbeatTimer = nil
        command = nil
        reconcileWanted = false
        results.forEach { PQclear($0) }
        results.removeAll()
        if let token { loop.deregister(fd, token: token) }
        token = nil
        if let connection { PQfinish(connection) }
        connection = nil
        active = []
        listener.shared.withLock { $0.activeChannels = [] }
    }

    // MARK: Commands

    private func reconcile(resyncAll: Bool) {
        let wanted = listener.shared.withLock { $0.consumers.values.reduce(into: Set<String>()) { $0.formUnion($1.channels) } }
        let commands = wanted.subtracting(active).sorted().map { "LISTEN \(quoted($0));" }
            + active.subtracting(wanted).sorted().map { "UNLISTEN \(quoted($0));" }
        if commands.isEmpty {
            reconciled(wanted: wanted, resyncAll: resyncAll)
        } else {
            send(commands.joined(separator: " "), as: .reconcile(wanted: wanted, resyncAll: resyncAll))
        }
    }

    private func reconciled(wanted: Set<String>, resyncAll: Bool) {
        active = wanted
        listener.shared.withLock { $0.activeChannels = wanted }
        listener.resync(onlyPending: !resyncAll)
        if resyncAll {
            listener.publish(.listening)
            armHeartbeat()
        }
        if reconcileWanted {
            reconcileWanted = false
            reconcile(resyncAll: false)
        }
    }

    private func armHeartbeat() {
        heartbeatTimer?.cancel()
        heartbeatTimer = loop.schedule(after: listener.heartbeatInterval) { [self] in
            if command == nil { perform(machine.heartbeatDue()) } else { armHeartbeat() }
        }
    }

    /// Sends a simple-protocol command; its answer (or `heartbeatTimeout`) comes back
    /// through `handle(events:)` (or the timer).
    private func send(_ sql: String, as kind: Command) {
        guard let connection, PQsendQuery(connection, sql) == 1 else {
            lost()
            return
        }
        let flushed = PQflush(connection)
        guard flushed >= 0 else {
            lost()
            return
        }
        command = kind
        let attempt = generation
        commandTimer = loop.schedule(after: listener.heartbeatTimeout) { [self] in
            guard attempt == generation, command != nil else { return }
            if case .heartbeat? = command {
                closeConnection()
                perform(machine.heartbeatTimedOut())
            } else {
                lost()
            }
        }
        if flushed == 1, let token { loop.modify(fd, token: token, events: WB_EPOLLIN | WB_EPOLLOUT) }
    }

    private func commandAnswered() {
        commandTimer?.cancel()
        commandTimer = nil
        let answered = results
        results.removeAll()
        defer { answered.forEach { PQclear($0) } }
        guard let kind = command else { return }
        command = nil
        if answered.contains(where: { PGSocket.resultError($0) != nil }) {
            lost()
            return
        }
        switch kind {
        case .reconcile(let wanted, let resyncAll):
            reconciled(wanted: wanted, resyncAll: resyncAll)
        case .heartbeat:
            let rows = answered.last.map(PGSocket.decode)?.rows ?? []
            let channels = Set(rows.compactMap { $0.values.first ?? nil })
            perform(machine.heartbeatAnswered(serverChannels: channels, expected: active))
            if case .listening = machine.state, command == nil { armHeartbeat() }
        }
    }

    // MARK: Socket

    func handle(events: UInt32) {
        guard let connection else { return }
        if events & WB_EPOLLOUT != 0 {
            let flushed = PQflush(connection)
            if flushed < 0 { return lost() }
            if flushed == 0, let token { loop.modify(fd, token: token, events: WB_EPOLLIN) }
        }
        guard events & (WB_EPOLLIN | WB_EPOLLERR | WB_EPOLLHUP) != 0 else { return }
        if PQconsumeInput(connection) == 0 { return lost() }
        listener.dispatchNotifications(connection)
        while command != nil, PQisBusy(connection) == 0 {
            guard let result = PQgetResult(connection) else {
                commandAnswered()
                break
            }
            results.append(result)
        }
        if self.connection != nil, PQstatus(connection) != CONNECTION_OK { lost() }
    }

    private func quoted(_ channel: String) -> String {
        "\"" + channel.replacingOccurrences(of: "\"", with: "\"\"") + "\""
    }
}

extension PGListener {
    /// Hands the notifications libpq has read to the consumers of their channels.
    func dispatchNotifications(_ connection: OpaquePointer) {
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
    func resync(onlyPending: Bool) {
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

    func publish(_ state: PGListenerState) {
        shared.withLock { $0.state = state }
    }
}
