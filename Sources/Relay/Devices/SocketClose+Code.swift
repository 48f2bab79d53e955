import HTTPServer
import RelayCore

/// The close code of each of the instance's reasons to close a phone's socket: RFC 6455's
/// where one fits (`WebSocketCloseCode`), and the app's own 4000-4002 where the phone must
/// act on it (docs/protocol.md, "The socket": 4000 never reconnects by itself, 4001 signs
/// in again, 4002 is past the user's cap).
extension SocketClose {
    /// A replaced or revoked device.
    static let replacedCode: UInt16 = 4000
    /// An expired or unusable credential.
    static let tokenExpiredCode: UInt16 = 4001
    /// A socket past the user's cap (`RelayDatabase.maxSocketsPerUser`).
    static let tooManyDevicesCode: UInt16 = 4002

    /// The close frame's code.
    var code: UInt16 {
        switch self {
        case .restart: WebSocketCloseCode.serviceRestart
        case .tooManyMessages, .invalidHello, .foreignDevice: WebSocketCloseCode.policyViolation
        case .tryAgain: WebSocketCloseCode.internalError
        case .revoked, .replaced: Self.replacedCode
        case .tooManyDevices: Self.tooManyDevicesCode
        case .tokenExpired: Self.tokenExpiredCode
        }
    }
}
