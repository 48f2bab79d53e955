import Crypto
import JSON

/// A public key from a JWKS (RSA or EC P-256), ready for signature checks (Crypto's
/// `RSAPublicKey` and `P256Key`).
final class PublicKey: Sendable {
    /// What the key is; a token's `alg` must match it (RS256 ↔ RSA, ES256 ↔ EC P-256).
    enum Kind: Sendable, Equatable {
        case rsa
        case p256
    }

    /// The key itself.
    private enum Material {
        case rsa(RSAPublicKey)
        case p256(P256Key)
    }

    let kid: String?
    private let material: Material

    private init(kid: String?, material: Material) {
        self.kid = kid
        self.material = material
    }

    var kind: Kind {
        switch material {
        case .rsa: .rsa
        case .p256: .p256
        }
    }

    /// Reads one JWK; nil for key types and curves we do not use (skipped, not an error).
    static func fromJWK(_ jwk: JSONValue) throws -> PublicKey? {
        let kid = jwk["kid"]?.string
        if let use = jwk["use"]?.string, use != "sig" { return nil }
        switch jwk["kty"]?.string {
        case "RSA":
            guard let n = jwk["n"]?.string.flatMap(Base64URL.decode), let e = jwk["e"]?.string.flatMap(Base64URL.decode),
                  n.count >= 256 else { throw AuthError.badKey }
            guard let key = RSAPublicKey(modulus: n, exponent: e) else { throw AuthError.badKey }
            return PublicKey(kid: kid, material: .rsa(key))
        case "EC":
            guard jwk["crv"]?.string == "P-256" else { return nil }
            guard let x = jwk["x"]?.string.flatMap(Base64URL.decode), let y = jwk["y"]?.string.flatMap(Base64URL.decode),
                  x.count == 32, y.count == 32, let key = try? P256Key(publicPoint: [0x04] + x + y) else { throw AuthError.badKey }
            return PublicKey(kid: kid, material: .p256(key))
        default:
            return nil
        }
    }

    /// Whether `signature` (JWS form) signs `message` with SHA-256 under this key.
    func verify(signature: [UInt8], message: [UInt8]) -> Bool {
        switch material {
        case .p256(let key):
            return key.verifyES256(signature, message: message)
        case .rsa(let key):
            return key.verifyRS256(signature, message: message)
        }
    }
}
