/// The few DER (X.690) encodings JWT verification needs: SubjectPublicKeyInfo for RSA and
/// P-256 keys from a JWK, and ECDSA signatures from JWS's raw r||s form.
enum DER {
    static func length(_ count: Int) -> [UInt8] {
        if count < 0x80 { return [UInt8(count)] }
        var bytes: [UInt8] = []
        var value = count
        while value > 0 { bytes.insert(UInt8(value & 0xFF), at: 0); value >>= 8 }
        return [0x80 | UInt8(bytes.count)] + bytes
    }

    static func tlv(_ tag: UInt8, _ content: [UInt8]) -> [UInt8] {
        [tag] + length(content.count) + content
    }

    static func sequence(_ parts: [UInt8]...) -> [UInt8] { tlv(0x30, parts.flatMap { $0 }) }

    /// A non-negative INTEGER from big-endian magnitude bytes.
    static func unsignedInteger(_ magnitude: [UInt8]) -> [UInt8] {
        var bytes = Array(magnitude.drop { $0 == 0 })
        if bytes.isEmpty { bytes = [0] }
        if bytes[0] & 0x80 != 0 { bytes.insert(0, at: 0) }
        return tlv(0x02, bytes)
    }

    static func bitString(_ bytes: [UInt8]) -> [UInt8] { tlv(0x03, [0] + bytes) }

    /// rsaEncryption (1.2.840.113549.1.1.1) with NULL parameters.
    static let rsaAlgorithm: [UInt8] = sequence([0x06, 0x09, 0x2A, 0x86, 0x48, 0x86, 0xF7, 0x0D, 0x01, 0x01, 0x01], [0x05, 0x00])
    /// id-ecPublicKey (1.2.840.10045.2.1) on prime256v1 (1.2.840.10045.3.1.7).
    static let p256Algorithm: [UInt8] = sequence([0x06, 0x07, 0x2A, 0x86, 0x48, 0xCE, 0x3D, 0x02, 0x01],
                                                 [0x06, 0x08, 0x2A, 0x86, 0x48, 0xCE, 0x3D, 0x03, 0x01, 0x07])

    /// SubjectPublicKeyInfo of an RSA key.
    static func rsaPublicKey(modulus: [UInt8], exponent: [UInt8]) -> [UInt8] {
        sequence(rsaAlgorithm, bitString(sequence(unsignedInteger(modulus), unsignedInteger(exponent))))
    }

    /// SubjectPublicKeyInfo of a P-256 key from its 32-byte coordinates.
    static func p256PublicKey(x: [UInt8], y: [UInt8]) -> [UInt8] {
        sequence(p256Algorithm, bitString([0x04] + x + y))
    }

    /// ECDSA-Sig-Value from JWS's 64-byte r||s.
    static func ecdsaSignature(raw: [UInt8]) -> [UInt8] {
        sequence(unsignedInteger(Array(raw[0..<32])), unsignedInteger(Array(raw[32..<64])))
    }
}
