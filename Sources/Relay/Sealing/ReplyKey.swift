import Crypto
import Foundation

/// A waiting instance's per-request X25519 key pair. Its public half goes into
/// `relay.pending_requests.reply_key`; the answer is sealed to it, so a location crosses
/// Postgres (NOTIFY payload, WAL, logs) only as ciphertext.
public final class ReplyKey: @unchecked Sendable {
    private let key: X25519Key

    /// A fresh key pair (generated ahead of time when the pool has one).
    public init() throws {
        key = try X25519KeyPool.shared.take()
    }

    /// The key pair of a 32-byte private key (a resumable request's, derived from its token).
    init(privateKey raw: [UInt8]) throws {
        key = try X25519Key(privateKey: raw)
    }

    /// The 32-byte public key.
    public var publicKey: [UInt8] { key.publicKey }

    /// Opens an answer sealed to this key for `requestID`.
    /// - Throws: `CryptoError.cannotOpen` when it was sealed to another key or request, or
    ///   was altered.
    public func open(_ sealed: String, requestID: UUID) throws -> [UInt8] {
        guard let bytes = Data(base64Encoded: sealed).map(Array.init),
              bytes.count >= Sealing.overhead else { throw CryptoError.cannotOpen }
        let ephemeral = Array(bytes[0..<32])
        let nonce = Array(bytes[32..<44])
        let body = Array(bytes[44...])
        let shared = try key.sharedSecret(with: X25519Key(publicKey: ephemeral))
        let symmetric = try Sealing.key(shared: shared, ephemeral: ephemeral, recipient: publicKey, requestID: requestID)
        return try AESGCM.open(body, key: symmetric, nonce: nonce, aad: Sealing.aad(requestID))
    }
}

/// Sealing an answer to a waiter's reply key: ephemeral X25519, HKDF-SHA256, AES-256-GCM.
///
/// Sealed form, base64: ephemeral public key (32) | nonce (12) | ciphertext | tag (16).
/// The key is HKDF-SHA256(shared secret, salt = ephemeral | recipient, info = label | id);
/// the request id is also the AEAD's associated data, so a sealed answer cannot be
/// replayed onto another request.
public enum Sealing {
    /// Bytes a sealed answer adds to its plaintext (before base64).
    public static let overhead = 32 + 12 + 16
    static let label = Array("whereabot sealed answer v1".utf8)

    /// Seals `plaintext` to `recipient` (a 32-byte X25519 public key) for `requestID`.
    public static func seal(_ plaintext: [UInt8], to recipient: [UInt8], requestID: UUID) throws -> String {
        let peer = try X25519Key(publicKey: recipient)
        let ephemeral = try X25519KeyPool.shared.take()
        let shared = try ephemeral.sharedSecret(with: peer)
        let ephemeralPublic = ephemeral.publicKey
        let symmetric = try key(shared: shared, ephemeral: ephemeralPublic, recipient: recipient, requestID: requestID)
        let nonce = try SecureRandom.bytes(12)
        let body = try AESGCM.seal(plaintext, key: symmetric, nonce: nonce, aad: aad(requestID))
        return Data(ephemeralPublic + nonce + body).base64EncodedString()
    }

    static func aad(_ requestID: UUID) -> [UInt8] { Array(requestID.uuidString.lowercased().utf8) }

    static func key(shared: [UInt8], ephemeral: [UInt8], recipient: [UInt8], requestID: UUID) throws -> [UInt8] {
        try HKDF.sha256(secret: shared, salt: ephemeral + recipient, info: label + aad(requestID), length: 32)
    }
}
