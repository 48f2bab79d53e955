import COpenSSL
import Glibc

/// HKDF (RFC 5869) with SHA-256 through OpenSSL's EVP_KDF: extract with a salt, expand
/// an info string to any length up to 255 × 32 bytes.
public enum HKDF {
    /// OSSL_PARAM keeps pointers to its key names, so they must outlive the call: C strings
    /// allocated once for the process.
    private nonisolated(unsafe) static let names: [UnsafeMutablePointer<CChar>] =
        ["digest", "key", "salt", "info"].map { (name: String) in strdup(name)! }

    /// The HKDF implementation, fetched once for the process (an implicit fetch per call
    /// costs a provider lookup; the fetched object is immutable and thread-safe).
    private nonisolated(unsafe) static let kdf: OpaquePointer? = EVP_KDF_fetch(nil, "HKDF", nil)

    /// `length` bytes derived from `secret` with `salt` and `info`.
    /// - Throws: `CryptoError.failed` when OpenSSL fails (or `length` is out of range).
    public static func sha256(secret: [UInt8], salt: [UInt8], info: [UInt8], length: Int) throws -> [UInt8] {
        guard (1...255 * 32).contains(length), let kdf, let context = EVP_KDF_CTX_new(kdf) else { throw CryptoError.failed }
        defer { EVP_KDF_CTX_free(context) }
        var secret = secret, salt = salt, info = info
        var digest = Array("SHA256".utf8CString)
        var output = [UInt8](repeating: 0, count: length)
        let derived = digest.withUnsafeMutableBufferPointer { digestBuffer in
            secret.withUnsafeMutableBytes { secretBuffer in
                salt.withUnsafeMutableBytes { saltBuffer in
                    info.withUnsafeMutableBytes { infoBuffer in
                        let params = [
                            OSSL_PARAM_construct_utf8_string(names[0], digestBuffer.baseAddress, 0),
                            OSSL_PARAM_construct_octet_string(names[1], secretBuffer.baseAddress, secretBuffer.count),
                            OSSL_PARAM_construct_octet_string(names[2], saltBuffer.baseAddress, saltBuffer.count),
                            OSSL_PARAM_construct_octet_string(names[3], infoBuffer.baseAddress, infoBuffer.count),
                            OSSL_PARAM_construct_end(),
                        ]
                        return EVP_KDF_derive(context, &output, length, params)
                    }
                }
            }
        }
        guard derived == 1 else { throw CryptoError.failed }
        return output
    }
}
