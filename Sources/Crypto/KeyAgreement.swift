import COpenSSL

/// Diffie-Hellman through EVP_PKEY_derive, shared by X25519 and P-256 (ECDH).
enum KeyAgreement {
    /// The 32-byte shared secret of `own` (a private key) and `peer` (a public key of the
    /// same type).
    /// - Throws: `CryptoError.badKey` when OpenSSL refuses the pair.
    static func derive(_ own: OpaquePointer, _ peer: OpaquePointer) throws -> [UInt8] {
        guard let context = EVP_PKEY_CTX_new(own, nil) else { throw CryptoError.failed }
        defer { EVP_PKEY_CTX_free(context) }
        var secret = [UInt8](repeating: 0, count: 32)
        var length = 32
        guard EVP_PKEY_derive_init(context) == 1, EVP_PKEY_derive_set_peer(context, peer) == 1,
              EVP_PKEY_derive(context, &secret, &length) == 1, length == 32 else { throw CryptoError.badKey }
        return secret
    }

    /// A fresh key pair of the EVP type `name` ("X25519", or "EC" with `group`).
    static func generate(_ name: String, group: String? = nil) throws -> OpaquePointer {
        guard let context = EVP_PKEY_CTX_new_from_name(nil, name, nil) else { throw CryptoError.failed }
        defer { EVP_PKEY_CTX_free(context) }
        var key: OpaquePointer?
        guard EVP_PKEY_keygen_init(context) == 1, group.map({ EVP_PKEY_CTX_set_group_name(context, $0) == 1 }) ?? true,
              EVP_PKEY_generate(context, &key) == 1, let key else { throw CryptoError.failed }
        return key
    }
}
