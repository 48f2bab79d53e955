import Foundation
import HTTPServer
import Synchronization

/// One phone's WebSocket. Its events reach the hub in order through a queue drained by a
/// task that exists only while events are pending, so an idle phone costs no task.
///
/// Bounded: at most `maximumQueuedEvents` messages wait for the hub; a phone that sends
/// faster than the hub can take them is closed 1008. The credential's expiry travels with
/// the socket and moves forward only with a verified `token` message. The socket's two
/// deadlines (its hello, its credential) are loop timers of its own, armed when they are
/// set and cancelled when it closes: no sweep visits idle sockets.
final class DeviceSession: WebSocketDelegate, @unchecked Sendable {
    /// What happened on the socket.
    enum Event: Sendable {
        case message(String)
        case closed
    }

    /// Messages that may wait for the hub per socket (SPEC §5).
    static let maximumQueuedEvents = 64

    /// This socket's id (relay.connections.id).
    let connection = UUID()
    /// The phone's verified user and session when the socket opened (they never change).
    let user: UUID
    let sessionID: UUID
    /// When the socket was opened: of two sockets of one device, the later one wins.
    let openedAt = Date()
    private let hub: DeviceHub
    private let state: Mutex<State>

    private struct State {
        var socket: WebSocket?
        var queue: [Event] = []
        var draining = false
        var credentialExpiresAt: Date
        /// The socket's place among those waiting for a hello, until it said one or closed.
        var waiting: HelloWaitingRoom.Ticket?
        /// The hello timeout, until it fired or the socket closed.
        var helloDeadline: RelayTimers.Handle?
        /// The credential's expiry plus the leeway, until it fired or the socket closed.
        var credentialDeadline: RelayTimers.Handle?
        var closed = false
    }

    init(phone: PhoneIdentity, hub: DeviceHub, waiting: HelloWaitingRoom.Ticket?) {
        self.user = phone.userID
        self.sessionID = phone.sessionID
        self.hub = hub
        self.state = Mutex(State(credentialExpiresAt: phone.expiresAt, waiting: waiting))
    }

    /// The socket said hello or closed: its place in the waiting room is given back, and
    /// its hello timer is stopped.
    func leaveWaitingRoom() {
        let (ticket, deadline) = state.withLock { state -> (HelloWaitingRoom.Ticket?, RelayTimers.Handle?) in
            defer { state.waiting = nil; state.helloDeadline = nil }
            return (state.waiting, state.helloDeadline)
        }
        deadline?.cancel()
        _ = ticket  // freed here, outside the lock
    }

    /// Sends a text frame (a JSON message) if the socket is open.
    func send(_ text: String) {
        state.withLock { $0.socket }?.send(text)
    }

    /// Closes the socket with a code and reason.
    func close(code: UInt16, reason: String) {
        state.withLock { $0.socket }?.close(code: code, reason: reason)
    }

    /// Whether the socket has closed (its `.closed` event may still be queued).
    var isClosed: Bool { state.withLock { $0.socket?.closeCode != nil } }

    /// When the socket's credential expires (without the leeway).
    var credentialExpiresAt: Date { state.withLock { $0.credentialExpiresAt } }

    /// A fresh token for the same user and session was verified: the socket lives on.
    func renewCredential(until expiry: Date) {
        state.withLock { $0.credentialExpiresAt = max($0.credentialExpiresAt, expiry) }
        armCredentialDeadline()
    }

    /// (Re)arms the credential's timer at its expiry plus the leeway, the old one cancelled.
    func armCredentialDeadline() {
        let hub = self.hub
        let replaced = state.withLock { state -> RelayTimers.Handle? in
            guard !state.closed else { return nil }
            let due = state.credentialExpiresAt.timeIntervalSinceNow + JWTVerifier.defaultLeeway + 0.01
            let old = state.credentialDeadline
            state.credentialDeadline = hub.timers.after(.milliseconds(Int(max(0, due) * 1000))) { [weak self] in
                guard let self else { return }
                await hub.credentialDeadlinePassed(self)
            }
            return old
        }
        replaced?.cancel()
    }

    func webSocketDidOpen(_ socket: WebSocket) {
        let hub = self.hub
        state.withLock { state in
            state.socket = socket
            state.helloDeadline = hub.timers.after(.milliseconds(Int(DeviceHub.helloTimeout * 1000))) { [weak self] in
                guard let self else { return }
                await hub.helloDeadlinePassed(self)
            }
        }
        armCredentialDeadline()
        hub.awaitHello(self)
    }

    func webSocket(_ socket: WebSocket, didReceive message: WebSocketMessage) {
        if case .text(let text) = message { enqueue(.message(text)) }
    }

    func webSocketDidClose(_ socket: WebSocket, code: UInt16, reason: String) {
        let deadlines = state.withLock { state -> [RelayTimers.Handle?] in
            state.closed = true
            defer { state.helloDeadline = nil; state.credentialDeadline = nil }
            return [state.helloDeadline, state.credentialDeadline]
        }
        deadlines.forEach { $0?.cancel() }
        enqueue(.closed)
    }

    private func enqueue(_ event: Event) {
        enum Decision { case start, queued, overflow }
        let decision = state.withLock { state -> Decision in
            if case .message = event, state.queue.count >= Self.maximumQueuedEvents { return .overflow }
            state.queue.append(event)
            if state.draining { return .queued }
            state.draining = true
            return .start
        }
        switch decision {
        case .start: Task(executorPreference: hub.executor) { await self.drain() }
        case .queued: break
        case .overflow: close(code: WebSocketCloseCode.policyViolation, reason: "too many messages")
        }
    }

    private func drain() async {
        while let event = state.withLock({ state -> Event? in
            if state.queue.isEmpty {
                state.draining = false
                state.queue = []  // an idle socket keeps no queue buffer
                return nil
            }
            return state.queue.removeFirst()
        }) {
            await hub.handle(event, from: self)
        }
    }
}
