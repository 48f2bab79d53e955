import COpenSSL

/// Random bytes from OpenSSL's CSPRNG, for keys, nonces, salts and tokens.
public enum SecureRandom {
    /// `count` random bytes.
    /// - Throws: `CryptoError.failed` when the generator cannot be seeded.
    public static func bytes(_ count: Int) throws -> [UInt8] {
        var bytes = [UInt8](repeating: 0, count: count)
        guard RAND_bytes(&bytes, Int32(count)) == 1 else { throw CryptoError.failed }
        return bytes
    }
}
