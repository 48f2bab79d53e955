import COpenSSL

/// A public key from a JWKS (RSA or EC P-256), ready for signature checks with OpenSSL.
final class PublicKey: @unchecked Sendable {
    /// What the key is; a token's `alg` must match it (RS256 ↔ RSA, ES256 ↔ EC P-256).
    enum Kind: Sendable, Equatable {
        case rsa
        case p256
    }

    let kind: Kind
    let kid: String?
    private let key: OpaquePointer

    private init(kind: Kind, kid: String?, subjectPublicKeyInfo der: [UInt8]) throws {
        let key = der.withUnsafeBufferPointer { buffer -> OpaquePointer? in
            var pointer: UnsafePointer<UInt8>? = buffer.baseAddress
            return d2i_PUBKEY(nil, &pointer, buffer.count)
        }
        guard let key else { throw AuthError.badKey }
        self.kind = kind
        self.kid = kid
        self.key = key
    }

    deinit { EVP_PKEY_free(key) }

    /// Reads one JWK; nil for key types and curves we do not use (skipped, not an error).
    static func fromJWK(_ jwk: [String: Any]) throws -> PublicKey? {
        let kid = jwk["kid"] as? String
        if let use = jwk["use"] as? String, use != "sig" { return nil }
        switch jwk["kty"] as? String {
        case "RSA":
            guard let n = (jwk["n"] as? String).flatMap(Base64URL.decode), let e = (jwk["e"] as? String).flatMap(Base64URL.decode),
                  n.count >= 256 else { throw AuthError.badKey }
            return try PublicKey(kind: .rsa, kid: kid, subjectPublicKeyInfo: DER.rsaPublicKey(modulus: n, exponent: e))
        case "EC":
            guard jwk["crv"] as? String == "P-256" else { return nil }
            guard let x = (jwk["x"] as? String).flatMap(Base64URL.decode), let y = (jwk["y"] as? String).flatMap(Base64URL.decode),
                  x.count == 32, y.count == 32 else { throw AuthError.badKey }
            return try PublicKey(kind: .p256, kid: kid, subjectPublicKeyInfo: DER.p256PublicKey(x: x, y: y))
        default:
            return nil
        }
    }

    /// Whether `signature` (JWS form) signs `message` with SHA-256 under this key.
    func verify(signature: [UInt8], message: [UInt8]) -> Bool {
        let der: [UInt8]
        switch kind {
        case .rsa: der = signature
        case .p256:
            guard signature.count == 64 else { return false }
            der = DER.ecdsaSignature(raw: signature)
        }
        guard let context = EVP_MD_CTX_new() else { return false }
        defer { EVP_MD_CTX_free(context) }
        guard EVP_DigestVerifyInit(context, nil, EVP_sha256(), nil, key) == 1 else { return false }
        return EVP_DigestVerify(context, der, der.count, message, message.count) == 1
    }
}
