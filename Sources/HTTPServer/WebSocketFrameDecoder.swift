/// An incremental WebSocket frame decoder and message assembler (RFC 6455 §5): bytes in,
/// messages and control frames out. No I/O, so it is tested directly and fuzzed.
///
/// As a server it requires masked frames (1002 otherwise); as a client, unmasked ones.
/// Fragmented messages are reassembled; text is validated as UTF-8 when complete (1007);
/// a message over the limit fails with 1009; reserved bits, unknown opcodes, fragmented or
/// oversized control frames and stray continuations fail with 1002.
public struct WebSocketFrameDecoder: Sendable {
    /// What the decoder found.
    public enum Event: Sendable, Equatable {
        /// A complete text message.
        case text(String)
        /// A complete binary message.
        case binary([UInt8])
        /// A ping with its payload.
        case ping([UInt8])
        /// A pong with its payload.
        case pong([UInt8])
        /// A close frame: the code (nil when the frame had none) and the reason.
        case close(code: UInt16?, reason: String)
        /// A protocol violation: close with this code.
        case failure(code: UInt16)
    }

    /// Which side of the connection this decoder reads for.
    public enum Role: Sendable {
        /// Reads a client's frames: they must be masked.
        case server
        /// Reads a server's frames: they must not be masked.
        case client
    }

    private let role: Role
    private let maxMessageBytes: Int
    private var buffer: [UInt8] = []
    private var start = 0
    private var fragments: [UInt8] = []
    private var fragmentOpcode: WebSocketOpcode?
    private var failed = false

    /// Creates a decoder for `role` with a message size limit.
    public init(role: Role, maxMessageBytes: Int) {
        self.role = role
        self.maxMessageBytes = maxMessageBytes
    }

    /// Adds received bytes.
    public mutating func append(_ bytes: UnsafeRawBufferPointer) {
        if start == buffer.count {
            buffer = []  // nothing kept between messages: an idle socket holds no buffer
            start = 0
        }
        buffer.append(contentsOf: bytes)
    }

    /// Adds received bytes.
    public mutating func append(_ bytes: [UInt8]) {
        bytes.withUnsafeBytes { append($0) }
    }

    /// Whether nothing is buffered (so an idle connection can release its memory).
    public var isIdle: Bool { start == buffer.count && fragmentOpcode == nil }

    /// The next event, or nil when more bytes are needed.
    public mutating func next() -> Event? {
        while !failed {
            let available = buffer.count - start
            guard available >= 2 else { return nil }
            let first = buffer[start], second = buffer[start + 1]
            let fin = first & 0x80 != 0
            guard first & 0x70 == 0 else { return fail(1002) }
            guard let opcode = WebSocketOpcode(rawValue: first & 0x0F) else { return fail(1002) }
            let masked = second & 0x80 != 0
            guard masked == (role == .server) else { return fail(1002) }
            var length = Int(second & 0x7F)
            var offset = 2
            if length == 126 {
                guard available >= 4 else { return nil }
                length = Int(buffer[start + 2]) << 8 | Int(buffer[start + 3])
                offset = 4
            } else if length == 127 {
                guard available >= 10 else { return nil }
                guard buffer[start + 2] & 0x80 == 0 else { return fail(1002) }
                var value: UInt64 = 0
                for index in 2..<10 { value = value << 8 | UInt64(buffer[start + index]) }
                guard value <= UInt64(Int32.max) else { return fail(1009) }
                length = Int(value)
                offset = 10
            }
            if opcode.isControl {
                guard fin, length <= 125 else { return fail(1002) }
            } else if length + fragments.count > maxMessageBytes {
                return fail(1009)
            }
            let maskOffset = offset
            if masked { offset += 4 }
            guard available >= offset + length else { return nil }

            var payload = Array(buffer[(start + offset)..<(start + offset + length)])
            if masked {
                let key = buffer[(start + maskOffset)..<(start + maskOffset + 4)].map { $0 }
                for index in payload.indices { payload[index] ^= key[index & 3] }
            }
            start += offset + length
            if start == buffer.count { buffer = []; start = 0 }  // released between messages

            switch opcode {
            case .ping: return .ping(payload)
            case .pong: return .pong(payload)
            case .close: return closeEvent(payload)
            case .continuation:
                guard let messageOpcode = fragmentOpcode else { return fail(1002) }
                fragments.append(contentsOf: payload)
                if fin {
                    let message = fragments
                    fragments = []
                    fragmentOpcode = nil
                    return complete(messageOpcode, message)
                }
            case .text, .binary:
                guard fragmentOpcode == nil else { return fail(1002) }
                if fin { return complete(opcode, payload) }
                fragmentOpcode = opcode
                fragments = payload
            }
        }
        return nil
    }

    private mutating func complete(_ opcode: WebSocketOpcode, _ payload: [UInt8]) -> Event {
        if opcode == .binary { return .binary(payload) }
        guard let text = String(validating: payload, as: UTF8.self) else { return fail(1007) }
        return .text(text)
    }

    private mutating func closeEvent(_ payload: [UInt8]) -> Event {
        if payload.isEmpty { return .close(code: nil, reason: "") }
        guard payload.count >= 2 else { return fail(1002) }
        let code = UInt16(payload[0]) << 8 | UInt16(payload[1])
        guard WebSocketCloseCode.isValidReceived(code) else { return fail(1002) }
        guard let reason = String(validating: payload[2...], as: UTF8.self) else { return fail(1007) }
        return .close(code: code, reason: reason)
    }

    private mutating func fail(_ code: UInt16) -> Event {
        failed = true
        return .failure(code: code)
    }
}
