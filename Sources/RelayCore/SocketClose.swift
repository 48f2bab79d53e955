/// Why the instance closes a phone's socket: the decision, named once, and the reason text
/// the close frame carries (docs/protocol.md, "The socket"). The close code each maps to
/// is the driver's (`SocketClose.code` in Relay): the value needs no server to name it.
package enum SocketClose: Sendable, Equatable {
    /// The instance drains: the phone reconnects to another one.
    case restart
    /// The socket sent more than it may before its hello was answered.
    case tooManyMessages
    /// Its hello could not be registered now (the database, or one bad hello in a batch).
    case tryAgain
    /// Its device was removed or its session revoked (the app must not reconnect by itself).
    case revoked
    /// Its device said hello on a newer socket.
    case replaced
    /// The user has as many sockets as they may.
    case tooManyDevices
    /// Its hello was not one.
    case invalidHello
    /// Its hello named a device of another user.
    case foreignDevice
    /// Its credential expired, or a `token` message was not a fresh one of the same session.
    case tokenExpired

    /// The text of the close frame (what the phone reads).
    package var reason: String {
        switch self {
        case .restart: "restart"
        case .tooManyMessages: "too many messages"
        case .tryAgain: "try again"
        case .revoked: "revoked"
        case .replaced: "replaced"
        case .tooManyDevices: "too_many_devices"
        case .invalidHello: "invalid hello"
        case .foreignDevice: "device belongs to another user"
        case .tokenExpired: "token_expired"
        }
    }
}
