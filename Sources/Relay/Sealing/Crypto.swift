import COpenSSL
import Glibc

/// X25519 through OpenSSL 3's EVP interface.
enum X25519 {
    static func generate() throws -> OpaquePointer {
        guard let context = EVP_PKEY_CTX_new_from_name(nil, "X25519", nil) else { throw SealError.crypto }
        defer { EVP_PKEY_CTX_free(context) }
        var key: OpaquePointer?
        guard EVP_PKEY_keygen_init(context) == 1, EVP_PKEY_generate(context, &key) == 1, let key else { throw SealError.crypto }
        return key
    }

    static func rawPublicKey(_ key: OpaquePointer) -> [UInt8] {
        var bytes = [UInt8](repeating: 0, count: 32)
        var length = 32
        _ = EVP_PKEY_get_raw_public_key(key, &bytes, &length)
        return bytes
    }

    static func publicKey(raw: [UInt8]) throws -> OpaquePointer {
        guard raw.count == 32, let key = EVP_PKEY_new_raw_public_key(EVP_PKEY_X25519, nil, raw, 32) else { throw SealError.badKey }
        return key
    }

    static func derive(_ own: OpaquePointer, _ peer: OpaquePointer) throws -> [UInt8] {
        guard let context = EVP_PKEY_CTX_new(own, nil) else { throw SealError.crypto }
        defer { EVP_PKEY_CTX_free(context) }
        var secret = [UInt8](repeating: 0, count: 32)
        var length = 32
        guard EVP_PKEY_derive_init(context) == 1, EVP_PKEY_derive_set_peer(context, peer) == 1,
              EVP_PKEY_derive(context, &secret, &length) == 1, length == 32 else { throw SealError.badKey }
        // An all-zero secret means a low-order peer point (RFC 7748 §6.1).
        guard secret.contains(where: { $0 != 0 }) else { throw SealError.badKey }
        return secret
    }
}

/// HKDF (RFC 5869) with SHA-256 through OpenSSL's EVP_KDF.
enum HKDF {
    /// OSSL_PARAM keeps pointers to its key names, so they must outlive the call: C strings
    /// allocated once for the process.
    private nonisolated(unsafe) static let names: [UnsafeMutablePointer<CChar>] =
        ["digest", "key", "salt", "info"].map { (name: String) in strdup(name)! }

    /// The HKDF implementation, fetched once for the process (an implicit fetch per call
    /// costs a provider lookup; the fetched object is immutable and thread-safe).
    private nonisolated(unsafe) static let kdf: OpaquePointer? = EVP_KDF_fetch(nil, "HKDF", nil)

    static func sha256(secret: [UInt8], salt: [UInt8], info: [UInt8], length: Int) throws -> [UInt8] {
        guard let kdf, let context = EVP_KDF_CTX_new(kdf) else { throw SealError.crypto }
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
        guard derived == 1 else { throw SealError.crypto }
        return output
    }
}

/// AES-256-GCM with a 12-byte nonce and a 16-byte tag appended to the ciphertext.
enum AESGCM {
    /// The cipher, fetched once for the process (EVP_aes_256_gcm() fetches at every init).
    private nonisolated(unsafe) static let cipher: OpaquePointer? = EVP_CIPHER_fetch(nil, "AES-256-GCM", nil)

    static func seal(_ plaintext: [UInt8], key: [UInt8], nonce: [UInt8], aad: [UInt8]) throws -> [UInt8] {
        guard let context = EVP_CIPHER_CTX_new() else { throw SealError.crypto }
        defer { EVP_CIPHER_CTX_free(context) }
        var output = [UInt8](repeating: 0, count: plaintext.count + 16)
        var length: Int32 = 0
        var tag = [UInt8](repeating: 0, count: 16)
        guard let cipher, EVP_EncryptInit_ex(context, cipher, nil, key, nonce) == 1,
              EVP_EncryptUpdate(context, nil, &length, aad, Int32(aad.count)) == 1,
              EVP_EncryptUpdate(context, &output, &length, plaintext, Int32(plaintext.count)) == 1 else { throw SealError.crypto }
        var total = Int(length)
        let finished = output.withUnsafeMutableBufferPointer { EVP_EncryptFinal_ex(context, $0.baseAddress! + total, &length) }
        guard finished == 1 else { throw SealError.crypto }
        total += Int(length)
        guard EVP_CIPHER_CTX_ctrl(context, EVP_CTRL_GCM_GET_TAG, 16, &tag) == 1 else { throw SealError.crypto }
        return Array(output.prefix(total)) + tag
    }

    static func open(_ sealed: [UInt8], key: [UInt8], nonce: [UInt8], aad: [UInt8]) throws -> [UInt8] {
        guard sealed.count >= 16 else { throw SealError.cannotOpen }
        let ciphertext = Array(sealed.dropLast(16))
        var tag = Array(sealed.suffix(16))
        guard let context = EVP_CIPHER_CTX_new() else { throw SealError.crypto }
        defer { EVP_CIPHER_CTX_free(context) }
        var output = [UInt8](repeating: 0, count: ciphertext.count + 16)
        var length: Int32 = 0
        guard let cipher, EVP_DecryptInit_ex(context, cipher, nil, key, nonce) == 1,
              EVP_DecryptUpdate(context, nil, &length, aad, Int32(aad.count)) == 1,
              EVP_DecryptUpdate(context, &output, &length, ciphertext, Int32(ciphertext.count)) == 1,
              EVP_CIPHER_CTX_ctrl(context, EVP_CTRL_GCM_SET_TAG, 16, &tag) == 1 else { throw SealError.cannotOpen }
        var total = Int(length)
        let finished = output.withUnsafeMutableBufferPointer { EVP_DecryptFinal_ex(context, $0.baseAddress! + total, &length) }
        guard finished == 1 else { throw SealError.cannotOpen }
        total += Int(length)
        return Array(output.prefix(total))
    }
}
