import COpenSSL
import Foundation

/// The symmetric primitives Web Push and APNs ids need: SHA-256, HMAC-SHA-256, HKDF with
/// one output block (RFC 5869, lengths ≤ 32) and AES-128-GCM sealing.
enum PushCrypto {
    /// SHA-256 of `bytes`.
    static func sha256(_ bytes: [UInt8]) -> [UInt8] {
        var digest = [UInt8](repeating: 0, count: 32)
        _ = SHA256(bytes, bytes.count, &digest)
        return digest
    }

    /// HMAC-SHA-256 of `message` under `key`.
    static func hmacSHA256(key: [UInt8], _ message: [UInt8]) -> [UInt8] {
        var digest = [UInt8](repeating: 0, count: 32)
        var length: UInt32 = 0
        _ = HMAC(EVP_sha256(), key, Int32(key.count), message, message.count, &digest, &length)
        return digest
    }

    /// HKDF-SHA-256: extract with `salt`, expand `info` to `length` (≤ 32) bytes.
    static func hkdf(salt: [UInt8], secret: [UInt8], info: [UInt8], length: Int) -> [UInt8] {
        precondition(length <= 32, "one HKDF block")
        let prk = hmacSHA256(key: salt, secret)
        return Array(hmacSHA256(key: prk, info + [0x01]).prefix(length))
    }

    /// AES-128-GCM: ciphertext followed by the 16-byte tag.
    static func sealAES128GCM(_ plaintext: [UInt8], key: [UInt8], nonce: [UInt8]) throws -> [UInt8] {
        guard key.count == 16, nonce.count == 12, let context = EVP_CIPHER_CTX_new() else { throw PushCryptoError.openSSL }
        defer { EVP_CIPHER_CTX_free(context) }
        var output = [UInt8](repeating: 0, count: plaintext.count + 16)
        var length: Int32 = 0
        var tag = [UInt8](repeating: 0, count: 16)
        guard EVP_EncryptInit_ex(context, EVP_aes_128_gcm(), nil, key, nonce) == 1,
              EVP_EncryptUpdate(context, &output, &length, plaintext, Int32(plaintext.count)) == 1 else {
            throw PushCryptoError.openSSL
        }
        var total = Int(length)
        let finished = output.withUnsafeMutableBufferPointer { EVP_EncryptFinal_ex(context, $0.baseAddress! + total, &length) }
        guard finished == 1, EVP_CIPHER_CTX_ctrl(context, EVP_CTRL_GCM_GET_TAG, 16, &tag) == 1 else {
            throw PushCryptoError.openSSL
        }
        total += Int(length)
        return Array(output.prefix(total)) + tag
    }

    /// Random bytes from OpenSSL's CSPRNG.
    static func random(_ count: Int) throws -> [UInt8] {
        var bytes = [UInt8](repeating: 0, count: count)
        guard RAND_bytes(&bytes, Int32(count)) == 1 else { throw PushCryptoError.openSSL }
        return bytes
    }
}

/// base64url without padding (RFC 4648 §5), as JWS, VAPID and Web Push keys use it.
public enum PushBase64URL {
    /// Encodes without padding.
    public static func encode(_ bytes: [UInt8]) -> String {
        Data(bytes).base64EncodedString().replacingOccurrences(of: "+", with: "-")
            .replacingOccurrences(of: "/", with: "_").replacingOccurrences(of: "=", with: "")
    }

    /// Decodes with or without padding; nil for anything outside the alphabet.
    public static func decode(_ text: String) -> [UInt8]? {
        var base64 = text.replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
        guard !base64.contains("=") || base64.hasSuffix("=") else { return nil }
        base64 = base64.replacingOccurrences(of: "=", with: "")
        base64 += String(repeating: "=", count: (4 - base64.count % 4) % 4)
        return Data(base64Encoded: base64).map(Array.init)
    }
}

/// A failure in push cryptography; its description names no key material.
public enum PushCryptoError: Error, Equatable, Sendable {
    /// Not a P-256 key in a format we read, or a point off the curve.
    case badKey
    /// OpenSSL failed.
    case openSSL
    /// The payload does not fit one 4096-byte record.
    case payloadTooLarge
}
