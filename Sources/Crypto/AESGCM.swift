import COpenSSL

/// AES-GCM with a 12-byte nonce and the 16-byte tag appended to the ciphertext: AES-128
/// for a 16-byte key (Web Push's aes128gcm), AES-256 for a 32-byte key (sealed answers,
/// wrapped request secrets).
public enum AESGCM {
    /// The ciphers, fetched once for the process (EVP_aes_*_gcm() fetches at every init).
    private nonisolated(unsafe) static let aes128: OpaquePointer? = EVP_CIPHER_fetch(nil, "AES-128-GCM", nil)
    private nonisolated(unsafe) static let aes256: OpaquePointer? = EVP_CIPHER_fetch(nil, "AES-256-GCM", nil)

    /// The tag's length in bytes.
    public static let tagLength = 16

    private static func cipher(forKey key: [UInt8], nonce: [UInt8]) throws -> OpaquePointer {
        guard nonce.count == 12 else { throw CryptoError.badKey }
        switch key.count {
        case 16: if let aes128 { return aes128 }
        case 32: if let aes256 { return aes256 }
        default: throw CryptoError.badKey
        }
        throw CryptoError.failed
    }

    /// `plaintext` sealed under `key` with `nonce` and associated data `aad`: ciphertext ‖ tag.
    public static func seal(_ plaintext: [UInt8], key: [UInt8], nonce: [UInt8], aad: [UInt8] = []) throws -> [UInt8] {
        let cipher = try cipher(forKey: key, nonce: nonce)
        guard let context = EVP_CIPHER_CTX_new() else { throw CryptoError.failed }
        defer { EVP_CIPHER_CTX_free(context) }
        var output = [UInt8](repeating: 0, count: plaintext.count + tagLength)
        var length: Int32 = 0
        var tag = [UInt8](repeating: 0, count: tagLength)
        guard EVP_EncryptInit_ex(context, cipher, nil, key, nonce) == 1,
              aad.isEmpty || EVP_EncryptUpdate(context, nil, &length, aad, Int32(aad.count)) == 1,
              EVP_EncryptUpdate(context, &output, &length, plaintext, Int32(plaintext.count)) == 1 else { throw CryptoError.failed }
        var total = Int(length)
        let finished = output.withUnsafeMutableBufferPointer { EVP_EncryptFinal_ex(context, $0.baseAddress! + total, &length) }
        guard finished == 1, EVP_CIPHER_CTX_ctrl(context, EVP_CTRL_GCM_GET_TAG, Int32(tagLength), &tag) == 1 else {
            throw CryptoError.failed
        }
        total += Int(length)
        return Array(output.prefix(total)) + tag
    }

    /// The plaintext of `sealed` (ciphertext ‖ tag).
    /// - Throws: `CryptoError.cannotOpen` when it was not sealed under `key`, `nonce` and
    ///   `aad`, or was altered.
    public static func open(_ sealed: [UInt8], key: [UInt8], nonce: [UInt8], aad: [UInt8] = []) throws -> [UInt8] {
        let cipher = try cipher(forKey: key, nonce: nonce)
        guard sealed.count >= tagLength else { throw CryptoError.cannotOpen }
        let ciphertext = Array(sealed.dropLast(tagLength))
        var tag = Array(sealed.suffix(tagLength))
        guard let context = EVP_CIPHER_CTX_new() else { throw CryptoError.failed }
        defer { EVP_CIPHER_CTX_free(context) }
        var output = [UInt8](repeating: 0, count: ciphertext.count + tagLength)
        var length: Int32 = 0
        guard EVP_DecryptInit_ex(context, cipher, nil, key, nonce) == 1,
              aad.isEmpty || EVP_DecryptUpdate(context, nil, &length, aad, Int32(aad.count)) == 1,
              EVP_DecryptUpdate(context, &output, &length, ciphertext, Int32(ciphertext.count)) == 1,
              EVP_CIPHER_CTX_ctrl(context, EVP_CTRL_GCM_SET_TAG, Int32(tagLength), &tag) == 1 else { throw CryptoError.cannotOpen }
        var total = Int(length)
        let finished = output.withUnsafeMutableBufferPointer { EVP_DecryptFinal_ex(context, $0.baseAddress! + total, &length) }
        guard finished == 1 else { throw CryptoError.cannotOpen }
        total += Int(length)
        return Array(output.prefix(total))
    }
}
