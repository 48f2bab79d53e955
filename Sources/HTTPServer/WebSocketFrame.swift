/// WebSocket frame opcodes (RFC 6455 §5.2).
public enum WebSocketOpcode: UInt8, Sendable {
    /// Continues a fragmented message.
    case continuation = 0x0
    /// A UTF-8 text message (or its first fragment).
    case text = 0x1
    /// A binary message (or its first fragment).
    case binary = 0x2
    /// Close, with an optional code and reason.
    case close = 0x8
    /// Ping; the peer answers with a pong carrying the same payload.
    case ping = 0x9
    /// Pong.
    case pong = 0xA

    /// Close, ping and pong are control frames: never fragmented, at most 125 bytes.
    var isControl: Bool { rawValue & 0x8 != 0 }
}

/// Close codes this server uses (RFC 6455 §7.4.1).
public enum WebSocketCloseCode {
    /// Normal closure.
    public static let normal: UInt16 = 1000
    /// The endpoint is going away (server shutdown without restart semantics).
    public static let goingAway: UInt16 = 1001
    /// Protocol error: bad framing, unmasked client frame, bad opcode.
    public static let protocolError: UInt16 = 1002
    /// A text message that is not UTF-8.
    public static let invalidPayload: UInt16 = 1007
    /// Policy violation (for example a peer that does not read what it is sent).
    public static let policyViolation: UInt16 = 1008
    /// A message larger than the limit.
    public static let messageTooBig: UInt16 = 1009
    /// An unexpected condition on the server.
    public static let internalError: UInt16 = 1011
    /// The server restarts; reconnect.
    public static let serviceRestart: UInt16 = 1012
    /// Try again later: the server is overloaded or not ready (the reason may say when).
    public static let tryAgainLater: UInt16 = 1013

    /// Whether a peer may send `code` in a close frame (RFC 6455 §7.4).
    static func isValidReceived(_ code: UInt16) -> Bool {
        switch code {
        case 1000...1003, 1007...1014: true
        case 3000...4999: true
        default: false
        }
    }
}

/// Builds frames. Servers send unmasked frames; clients must mask theirs.
enum WebSocketFrameEncoder {
    /// One frame with FIN set.
    /// - Parameters:
    ///   - opcode: the frame's opcode.
    ///   - payload: the payload bytes.
    ///   - maskKey: four bytes for a client frame, nil for a server frame.
    static func frame(_ opcode: WebSocketOpcode, _ payload: [UInt8], maskKey: [UInt8]? = nil) -> [UInt8] {
        var frame: [UInt8] = []
        frame.reserveCapacity(payload.count + 14)
        frame.append(0x80 | opcode.rawValue)
        let maskBit: UInt8 = maskKey == nil ? 0 : 0x80
        switch payload.count {
        case ..<126:
            frame.append(maskBit | UInt8(payload.count))
        case ..<65536:
            frame.append(maskBit | 126)
            frame.append(UInt8(payload.count >> 8))
            frame.append(UInt8(payload.count & 0xFF))
        default:
            frame.append(maskBit | 127)
            for shift in stride(from: 56, through: 0, by: -8) { frame.append(UInt8((payload.count >> shift) & 0xFF)) }
        }
        if let maskKey {
            frame.append(contentsOf: maskKey)
            for (index, byte) in payload.enumerated() { frame.append(byte ^ maskKey[index & 3]) }
        } else {
            frame.append(contentsOf: payload)
        }
        return frame
    }

    /// A close frame with a code and a reason (cut to fit the 125-byte control limit).
    static func close(code: UInt16, reason: String, maskKey: [UInt8]? = nil) -> [UInt8] {
        var payload = [UInt8(code >> 8), UInt8(code & 0xFF)]
        var reasonBytes = Array(reason.utf8.prefix(123))
        while String(validating: reasonBytes, as: UTF8.self) == nil { reasonBytes.removeLast() }
        payload.append(contentsOf: reasonBytes)
        return frame(.close, payload, maskKey: maskKey)
    }
}
