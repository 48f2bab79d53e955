import COpenSSL

/// An RSA public key (from a JWK's modulus and exponent) that checks RS256 signatures
/// (RSASSA-PKCS1-v1_5 with SHA-256) with OpenSSL. Immutable, so safe to share.
public final class RSAPublicKey: @unchecked Sendable {
    private let key: OpaquePointer

    /// The key of `modulus` and `exponent` (big-endian magnitudes); nil when OpenSSL refuses it.
    public init?(modulus: [UInt8], exponent: [UInt8]) {
        let der = DER.rsaPublicKey(modulus: modulus, exponent: exponent)
        let key = der.withUnsafeBufferPointer { buffer -> OpaquePointer? in
            var pointer: UnsafePointer<UInt8>? = buffer.baseAddress
            return d2i_PUBKEY(nil, &pointer, buffer.count)
        }
        guard let key else { return nil }
        self.key = key
    }

    deinit {
        EVP_PKEY_free(key)
    }

    /// Whether `signature` signs `message` with SHA-256 under this key.
    public func verifyRS256(_ signature: [UInt8], message: [UInt8]) -> Bool {
        guard let context = EVP_MD_CTX_new() else { return false }
        defer { EVP_MD_CTX_free(context) }
        return EVP_DigestVerifyInit(context, nil, EVP_sha256(), nil, key) == 1
            && EVP_DigestVerify(context, signature, signature.count, message, message.count) == 1
    }
}
