/// Crypto: the primitives every part of Whereabot signs, seals and derives with —
/// base64url, SHA-256, HMAC-SHA-256, HKDF-SHA-256, AES-GCM, X25519, P-256 (ECDH, ES256) and
/// random bytes — over OpenSSL 3's EVP interface, in one place for the relay, push and
/// the fuzz targets.
///
/// It knows nothing of locations, tokens or push services: callers give it bytes and keys
/// and decide what they mean. Nothing here logs, and no error describes key material.

/// Why a cryptographic operation failed; no case carries detail, so nothing about keys or
/// content can leak through an error.
public enum CryptoError: Error, Equatable, Sendable {
    /// A key was the wrong size, not on its curve, or not in a format we read.
    case badKey
    /// Sealed bytes were not sealed under this key (or with this associated data), or were
    /// altered.
    case cannotOpen
    /// OpenSSL failed (out of memory, no provider).
    case failed
}
