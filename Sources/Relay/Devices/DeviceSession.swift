import Foundation
import HTTPServer
import Synchronization

/// One phone's WebSocket. Its events reach the hub in order through a queue drained by a
/// task that exists only while events are pending, so an idle phone costs no task.
final class DeviceSession: WebSocketDelegate, @unchecked Sendable {
    /// What happened on the socket.
    enum Event: Sendable {
        case message(String)
        case closed
    }

    /// This socket's id (relay.connections.id).
    let connection = UUID()
    /// The phone's verified identity.
    let phone: PhoneIdentity
    private let hub: DeviceHub
    private let state = Mutex<State>(State())

    private struct State {
        var socket: WebSocket?
        var queue: [Event] = []
        var draining = false
    }

    init(phone: PhoneIdentity, hub: DeviceHub) {
        self.phone = phone
        self.hub = hub
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

    func webSocketDidOpen(_ socket: WebSocket) {
        state.withLock { $0.socket = socket }
    }

    func webSocket(_ socket: WebSocket, didReceive message: WebSocketMessage) {
        if case .text(let text) = message { enqueue(.message(text)) }
    }

    func webSocketDidClose(_ socket: WebSocket, code: UInt16, reason: String) {
        enqueue(.closed)
    }

    private func enqueue(_ event: Event) {
        let start = state.withLock { state -> Bool in
            state.queue.append(event)
            if state.draining { return false }
            state.draining = true
            return true
        }
        if start { Task { await drain() } }
    }

    private func drain() async {
        while let event = state.withLock({ state -> Event? in
            if state.queue.isEmpty {
                state.draining = false
                return nil
            }
            return state.queue.removeFirst()
        }) {
            await hub.handle(event, from: self)
        }
    }
}
