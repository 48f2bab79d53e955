/// Receives a WebSocket's events on the server's event-loop thread, in order. Methods must
/// not block; `send` and `close` on the socket may be called from them or from any task.
public protocol WebSocketDelegate: AnyObject, Sendable {
    /// The upgrade completed.
    func webSocketDidOpen(_ socket: WebSocket)
    /// A complete text or binary message arrived.
    func webSocket(_ socket: WebSocket, didReceive message: WebSocketMessage)
    /// The socket closed (close frame sent or received, or the connection dropped: 1006).
    func webSocketDidClose(_ socket: WebSocket, code: UInt16, reason: String)
}
