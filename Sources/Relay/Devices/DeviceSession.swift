import Foundation
import HTTPServer
import RelayCore
import Synchronization

/// One phone's WebSocket. Its events reach the driver in order through a queue drained by a
/// task that exists only while events are pending, so an idle phone costs no task.
///
/// Bounded: at most `maximumQueuedEvents` messages wait for the driver; a phone that sends
/// faster than the driver can take them is closed 1008. The credential's expiry travels with
/// the socket and moves forward only with a verified `token` message. The socket's
/// deadline — its hello's until it says one, then its credential's expiry plus the leeway
/// — is the WebSocket's own close deadline, kept by its connection's one timer: no sweep
/// visits idle sockets, and no timer of its own is kept per socket.
final class DeviceSession: PhoneHandle, WebSocketDelegate, @unchecked Sendable {
    /// What happened on the socket.
    enum Event: Sendable {
        case opened
        case message(String)
        case closed
    }

    /// Messages that may wait for the driver per socket (docs/protocol.md, "The socket").
    static let maximumQueuedEvents = 64

    // Its id (relay.connections.id), its phone's verified user and session when it opened
    // (they never change) and when it opened are the `PhoneHandle`'s.
    private let driver: InstanceDriver
    private let state: Mutex<State>

    private struct State {
        var socket: WebSocket?
        var queue: [Event] = []
        var draining = false
        var credentialExpiresAt: Date
        /// The socket's place among those waiting for a hello, until it said one or closed.
        var waiting: HelloWaitingRoom.Ticket?
    }

    init(phone: PhoneIdentity, driver: InstanceDriver, waiting: HelloWaitingRoom.Ticket?) {
        self.driver = driver
        self.state = Mutex(State(credentialExpiresAt: phone.expiresAt, waiting: waiting))
        super.init(user: phone.userID, sessionID: phone.sessionID, openedAt: driver.clock.date)
    }

    /// The socket said hello or closed: its place in the waiting room is given back, and
    /// its deadline is its credential's from now on. Returns the client address of a socket
    /// that was still waiting (nil after its hello).
    @discardableResult
    func leaveWaitingRoom() -> String? {
        let ticket = state.withLock { state -> HelloWaitingRoom.Ticket? in
            defer { state.waiting = nil }
            return state.waiting
        }
        armCredentialDeadline()
        return ticket?.address  // the ticket is freed here, outside the lock
    }

    /// Sends a text frame (a JSON message) if the socket is open.
    func send(_ text: String) {
        state.withLock { $0.socket }?.send(text)
    }

    /// Closes the socket with a code and reason.
    func close(code: UInt16, reason: String) {
        state.withLock { $0.socket }?.close(code: code, reason: reason)
    }

    /// When the socket's credential expires (without the leeway).
    var credentialExpiresAt: Date { state.withLock { $0.credentialExpiresAt } }

    /// A fresh token for the same user and session was verified: the socket lives on.
    func renewCredential(until expiry: Date) {
        state.withLock { $0.credentialExpiresAt = max($0.credentialExpiresAt, expiry) }
        armCredentialDeadline()
    }

    /// The socket closes 4001 "token_expired" once its credential is past its expiry and
    /// the leeway.
    private func armCredentialDeadline() {
        let (socket, expiresAt) = state.withLock { ($0.socket, $0.credentialExpiresAt) }
        let left = expiresAt.timeIntervalSince(driver.clock.date) + JWTVerifier.defaultLeeway
        socket?.close(after: .milliseconds(Int64(max(0, left) * 1000) + 1), code: SocketClose.tokenExpired.code,
                      reason: SocketClose.tokenExpired.reason)
    }

    func webSocketDidOpen(_ socket: WebSocket) {
        state.withLock { $0.socket = socket }
        socket.close(after: .milliseconds(Int64(InstanceDriver.helloTimeout * 1000)), code: WebSocketCloseCode.policyViolation,
                     reason: "hello timeout")
        enqueue(.opened)
    }

    func webSocket(_ socket: WebSocket, didReceive message: WebSocketMessage) {
        if case .text(let text) = message { enqueue(.message(text)) }
    }

    func webSocketDidClose(_ socket: WebSocket, code: UInt16, reason: String) {
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
        case .start:
            // Owner: the driver's event tasks (`RelayTimers.events`), which the instance's
            // shutdown waits for; once they are finished (the sockets are closed by then)
            // nothing more is handed to the driver.
            driver.timers.events.spawn(executorPreference: driver.executor) { await self.drain() }
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
            await driver.handle(event, from: self)
        }
    }
}

