import COpenSSL

/// An X25519 key (RFC 7748): a private key pair, or a peer's public key.
public final class X25519Key: @unchecked Sendable {
    // EVP_PKEY is immutable once built and OpenSSL allows concurrent use of a key.
    private let key: OpaquePointer
    /// Whether the private half is present.
    public let isPrivate: Bool

    private init(_ key: OpaquePointer, isPrivate: Bool) {
        self.key = key
        self.isPrivate = isPrivate
    }

    deinit { EVP_PKEY_free(key) }

    /// A fresh key pair (a scalar multiplication: ~40 µs here).
    public static func generate() throws -> X25519Key {
        X25519Key(try KeyAgreement.generate("X25519"), isPrivate: true)
    }

    /// The key pair of a 32-byte private key.
    public convenience init(privateKey raw: [UInt8]) throws {
        guard raw.count == 32, let key = EVP_PKEY_new_raw_private_key(EVP_PKEY_X25519, nil, raw, 32) else { throw CryptoError.badKey }
        self.init(key, isPrivate: true)
    }

    /// A peer's 32-byte public key.
    public convenience init(publicKey raw: [UInt8]) throws {
        guard raw.count == 32, let key = EVP_PKEY_new_raw_public_key(EVP_PKEY_X25519, nil, raw, 32) else { throw CryptoError.badKey }
        self.init(key, isPrivate: false)
    }

    /// The 32-byte public key.
    public var publicKey: [UInt8] {
        var bytes = [UInt8](repeating: 0, count: 32)
        var length = 32
        _ = EVP_PKEY_get_raw_public_key(key, &bytes, &length)
        return bytes
    }

    /// The 32-byte shared secret with `peer`.
    /// - Throws: `CryptoError.badKey` without a private half, or for a low-order peer point
    ///   (an all-zero secret, RFC 7748 §6.1).
    public func sharedSecret(with peer: X25519Key) throws -> [UInt8] {
        guard isPrivate else { throw CryptoError.badKey }
        let secret = try KeyAgreement.derive(key, peer.key)
        guard secret.contains(where: { $0 != 0 }) else { throw CryptoError.badKey }
        return secret
    }
}
