import COpenSSL

/// A P-256 (prime256v1) key through OpenSSL 3's EVP interface: the APNs provider key
/// (PKCS#8 PEM), the VAPID key (a raw 32-byte scalar), Web Push's one-message keys, and a
/// subscription's public key (65-byte uncompressed point).
public final class P256Key: @unchecked Sendable {
    // EVP_PKEY is immutable once built and OpenSSL allows concurrent use of a key.
    let key: OpaquePointer
    /// Whether the private half is present.
    public let isPrivate: Bool

    private init(_ key: OpaquePointer, isPrivate: Bool) {
        self.key = key
        self.isPrivate = isPrivate
    }

    deinit { EVP_PKEY_free(key) }

    /// A fresh private key.
    public static func generate() throws -> P256Key {
        P256Key(try KeyAgreement.generate("EC", group: "P-256"), isPrivate: true)
    }

    /// A private key from PEM (PKCS#8 "PRIVATE KEY" or SEC1 "EC PRIVATE KEY"), such as an
    /// APNs `.p8` file. Throws `badKey` for anything else, another curve included.
    public convenience init(pem: String) throws {
        let bytes = Array(pem.utf8)
        guard bytes.count < 16_384, let bio = BIO_new_mem_buf(bytes, Int32(bytes.count)) else { throw CryptoError.badKey }
        defer { BIO_free(bio) }
        guard let key = PEM_read_bio_PrivateKey(bio, nil, nil, nil) else { throw CryptoError.badKey }
        try self.init(checking: key, isPrivate: true)
    }

    /// A private key from its raw 32-byte scalar (VAPID's format); the public key is derived.
    public convenience init(rawPrivate scalar: [UInt8]) throws {
        guard scalar.count == 32, scalar.contains(where: { $0 != 0 }), scalar.lexicographicallyPrecedes(Self.order) else {
            throw CryptoError.badKey
        }
        // SEC1 ECPrivateKey { version 1, privateKey, [0] prime256v1 } without the public key:
        // OpenSSL computes it (and refuses a scalar outside 1 … n−1).
        let der: [UInt8] = [0x30, 0x31, 0x02, 0x01, 0x01, 0x04, 0x20] + scalar
            + [0xA0, 0x0A, 0x06, 0x08, 0x2A, 0x86, 0x48, 0xCE, 0x3D, 0x03, 0x01, 0x07]
        let key = der.withUnsafeBufferPointer { buffer -> OpaquePointer? in
            var pointer: UnsafePointer<UInt8>? = buffer.baseAddress
            return d2i_PrivateKey(EVP_PKEY_EC, nil, &pointer, buffer.count)
        }
        guard let key else { throw CryptoError.badKey }
        try self.init(checking: key, isPrivate: true)
    }

    /// The order n of P-256's base point; a private scalar lies in 1 … n−1.
    static let order: [UInt8] = [0xFF, 0xFF, 0xFF, 0xFF, 0x00, 0x00, 0x00, 0x00, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF,
                                 0xBC, 0xE6, 0xFA, 0xAD, 0xA7, 0x17, 0x9E, 0x84, 0xF3, 0xB9, 0xCA, 0xC2, 0xFC, 0x63, 0x25, 0x51]

    /// A public key from its 65-byte uncompressed point (04 ‖ x ‖ y); a point off the curve
    /// is refused.
    public convenience init(publicPoint point: [UInt8]) throws {
        guard point.count == 65, point[0] == 0x04 else { throw CryptoError.badKey }
        // SubjectPublicKeyInfo { id-ecPublicKey prime256v1, BIT STRING point }.
        let der: [UInt8] = [0x30, 0x59, 0x30, 0x13, 0x06, 0x07, 0x2A, 0x86, 0x48, 0xCE, 0x3D, 0x02, 0x01,
                            0x06, 0x08, 0x2A, 0x86, 0x48, 0xCE, 0x3D, 0x03, 0x01, 0x07, 0x03, 0x42, 0x00] + point
        let key = der.withUnsafeBufferPointer { buffer -> OpaquePointer? in
            var pointer: UnsafePointer<UInt8>? = buffer.baseAddress
            return d2i_PUBKEY(nil, &pointer, buffer.count)
        }
        guard let key else { throw CryptoError.badKey }
        try self.init(checking: key, isPrivate: false)
    }

    private init(checking key: OpaquePointer, isPrivate: Bool) throws {
        var name = [CChar](repeating: 0, count: 32)
        var length = 0
        guard EVP_PKEY_get_base_id(key) == EVP_PKEY_EC,
              EVP_PKEY_get_group_name(key, &name, name.count, &length) == 1,
              String(cString: name) == "prime256v1" else {
            EVP_PKEY_free(key)
            throw CryptoError.badKey
        }
        self.key = key
        self.isPrivate = isPrivate
    }

    /// The public key as a 65-byte uncompressed point.
    public var publicPoint: [UInt8] {
        var pointer: UnsafeMutablePointer<UInt8>?
        let length = EVP_PKEY_get1_encoded_public_key(key, &pointer)
        guard length == 65, let pointer else { return [] }
        defer { CRYPTO_free(pointer, #fileID, #line) }
        return Array(UnsafeBufferPointer(start: pointer, count: length))
    }

    /// The private scalar (32 bytes), for `whereabot vapid-keys`.
    public var rawPrivate: [UInt8] {
        var number: OpaquePointer?
        guard isPrivate, EVP_PKEY_get_bn_param(key, "priv", &number) == 1, let number else { return [] }
        defer { BN_clear_free(number) }
        var bytes = [UInt8](repeating: 0, count: 32)
        guard BN_bn2binpad(number, &bytes, 32) == 32 else { return [] }
        return bytes
    }

    /// An ES256 (JWS) signature: ECDSA P-256 over SHA-256, as the 64-byte r ‖ s.
    public func signES256(_ message: [UInt8]) throws -> [UInt8] {
        guard isPrivate, let context = EVP_MD_CTX_new() else { throw CryptoError.failed }
        defer { EVP_MD_CTX_free(context) }
        var length = 0
        guard EVP_DigestSignInit(context, nil, EVP_sha256(), nil, key) == 1,
              EVP_DigestSign(context, nil, &length, message, message.count) == 1 else { throw CryptoError.failed }
        var der = [UInt8](repeating: 0, count: length)
        guard EVP_DigestSign(context, &der, &length, message, message.count) == 1 else { throw CryptoError.failed }
        return try Self.rawSignature(der: Array(der.prefix(length)))
    }

    /// Whether `signature` (JWS's 64-byte r ‖ s) is this key's ES256 signature of `message`.
    public func verifyES256(_ signature: [UInt8], message: [UInt8]) -> Bool {
        guard signature.count == 64, let context = EVP_MD_CTX_new() else { return false }
        defer { EVP_MD_CTX_free(context) }
        let der = Self.derSignature(raw: signature)
        return EVP_DigestVerifyInit(context, nil, EVP_sha256(), nil, key) == 1
            && EVP_DigestVerify(context, der, der.count, message, message.count) == 1
    }

    /// ECDH with `peer`: the 32-byte shared x coordinate.
    public func sharedSecret(with peer: P256Key) throws -> [UInt8] {
        guard isPrivate else { throw CryptoError.failed }
        return try KeyAgreement.derive(key, peer.key)
    }

    /// A DER ECDSA-Sig-Value (SEQUENCE of two INTEGERs) from JWS's 64-byte r ‖ s.
    static func derSignature(raw: [UInt8]) -> [UInt8] {
        func integer(_ bytes: ArraySlice<UInt8>) -> [UInt8] {
            var magnitude = Array(bytes.drop { $0 == 0 })
            if magnitude.isEmpty || magnitude[0] & 0x80 != 0 { magnitude.insert(0, at: 0) }
            return [0x02, UInt8(magnitude.count)] + magnitude
        }
        let content = integer(raw[0..<32]) + integer(raw[32..<64])
        return [0x30, UInt8(content.count)] + content
    }

    /// JWS's r ‖ s from a DER ECDSA-Sig-Value (SEQUENCE of two INTEGERs of at most 33
    /// bytes, so their lengths are in the short form).
    static func rawSignature(der: [UInt8]) throws -> [UInt8] {
        guard der.count >= 8, der[0] == 0x30 else { throw CryptoError.failed }
        var index = der[1] & 0x80 == 0 ? 2 : 2 + Int(der[1] & 0x7F)
        var raw: [UInt8] = []
        for _ in 0..<2 {
            guard index + 2 <= der.count, der[index] == 0x02 else { throw CryptoError.failed }
            let length = Int(der[index + 1])
            index += 2
            guard length <= 33, index + length <= der.count else { throw CryptoError.failed }
            let magnitude = der[index..<index + length].drop { $0 == 0 }
            guard magnitude.count <= 32 else { throw CryptoError.failed }
            raw += [UInt8](repeating: 0, count: 32 - magnitude.count) + magnitude
            index += length
        }
        return raw
    }
}
