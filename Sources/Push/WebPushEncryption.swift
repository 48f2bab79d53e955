import Crypto

/// RFC 8291 message encryption for Web Push: `aes128gcm` (RFC 8188) with a fresh P-256 key
/// pair and salt per message, one record of `rs = 4096`, keyid = the sender's public key.
public enum WebPushEncryption {
    /// The largest payload: header 86 + payload + delimiter 1 + tag 16 ≤ 4096 bytes.
    public static let maximumPayload = 3993
    /// The record size written in the header.
    static let recordSize: UInt32 = 4096

    /// Encrypts `payload` for the subscription (`p256dh`: 65-byte point, `auth`: 16 bytes).
    /// `senderKey` and `salt` are for the RFC 8291 §5 test vector only.
    public static func encrypt(_ payload: [UInt8], p256dh: [UInt8], auth: [UInt8],
                               senderKey: P256Key? = nil, salt: [UInt8]? = nil) throws -> [UInt8] {
        guard payload.count <= maximumPayload else { throw WebPushEncryptionError.payloadTooLarge }
        guard auth.count == 16 else { throw CryptoError.badKey }
        let receiver = try P256Key(publicPoint: p256dh)
        let sender = try senderKey ?? P256Key.generate()
        let salt = try salt ?? SecureRandom.bytes(16)
        guard salt.count == 16 else { throw CryptoError.badKey }
        let senderPoint = sender.publicPoint
        let secret = try sender.sharedSecret(with: receiver)

        let keyInfo = Array("WebPush: info".utf8) + [0] + p256dh + senderPoint
        let ikm = try HKDF.sha256(secret: secret, salt: auth, info: keyInfo, length: 32)
        let key = try HKDF.sha256(secret: ikm, salt: salt, info: Array("Content-Encoding: aes128gcm".utf8) + [0], length: 16)
        let nonce = try HKDF.sha256(secret: ikm, salt: salt, info: Array("Content-Encoding: nonce".utf8) + [0], length: 12)
        // One record, the last: the payload and the delimiter 0x02, no padding.
        let record = try AESGCM.seal(payload + [0x02], key: key, nonce: nonce)
        let size = recordSize
        let header = salt + [UInt8(size >> 24), UInt8(size >> 16 & 0xFF), UInt8(size >> 8 & 0xFF), UInt8(size & 0xFF)]
            + [UInt8(senderPoint.count)] + senderPoint
        return header + record
    }
}

/// Why a Web Push message could not be encrypted (a bad subscription key is
/// `CryptoError.badKey`).
public enum WebPushEncryptionError: Error, Equatable, Sendable {
    /// The payload does not fit one 4096-byte record.
    case payloadTooLarge
}
