import Crypto

/// Proof Key for Code Exchange (RFC 7636), S256 only (OAuth 2.1).
enum PKCE {
    /// Whether `challenge` has the shape of an S256 challenge (base64url of 32 bytes).
    static func isChallenge(_ challenge: String) -> Bool {
        challenge.utf8.count == 43 && challenge.utf8.allSatisfy(isBase64URL)
    }

    /// The S256 challenge of `verifier`, or nil when it is not a verifier (43 to 128 of
    /// `A-Z a-z 0-9 - . _ ~`, RFC 7636 §4.1).
    static func challenge(ofVerifier verifier: String) -> String? {
        guard (43...128).contains(verifier.utf8.count),
              verifier.utf8.allSatisfy({ isBase64URL($0) || $0 == UInt8(ascii: ".") || $0 == UInt8(ascii: "~") }) else { return nil }
        return Base64URL.encode(Digest.sha256(Array(verifier.utf8)))
    }

    private static func isBase64URL(_ byte: UInt8) -> Bool {
        (0x41...0x5A).contains(byte) || (0x61...0x7A).contains(byte) || (0x30...0x39).contains(byte) || byte == 0x2D || byte == 0x5F
    }
}
