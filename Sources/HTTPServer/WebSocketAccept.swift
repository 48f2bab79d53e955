import COpenSSL
import Foundation

/// The `Sec-WebSocket-Accept` value of RFC 6455 §4.2.2.
public enum WebSocketAccept {
    /// The GUID that RFC 6455 appends to the client's key before hashing.
    public static let guid = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"

    /// Returns base64(SHA-1(key + GUID)) for the client's `Sec-WebSocket-Key`.
    /// - Parameter key: the header value as the client sent it (already trimmed).
    /// - Returns: the value for the `Sec-WebSocket-Accept` response header.
    public static func value(forKey key: String) -> String {
        let input = Array((key + guid).utf8)
        var digest = [UInt8](repeating: 0, count: Int(SHA_DIGEST_LENGTH))
        _ = input.withUnsafeBufferPointer { bytes in
            SHA1(bytes.baseAddress, bytes.count, &digest)
        }
        return Data(digest).base64EncodedString()
    }

    /// Whether `key` is base64 of 16 bytes, as RFC 6455 requires.
    public static func isValidKey(_ key: String) -> Bool {
        Data(base64Encoded: key)?.count == 16
    }

    /// A fresh random key for a client's handshake (16 random bytes from OpenSSL).
    public static func randomKey() -> String {
        Data(RandomBytes.make(16)).base64EncodedString()
    }
}

/// Random bytes from OpenSSL's CSPRNG.
enum RandomBytes {
    static func make(_ count: Int) -> [UInt8] {
        var bytes = [UInt8](repeating: 0, count: count)
        precondition(RAND_bytes(&bytes, Int32(count)) == 1, "RAND_bytes failed")
        return bytes
    }
}
