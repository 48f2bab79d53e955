import COpenSSL
import Foundation

/// Real keys for JWT tests: generated with OpenSSL, exported as JWKs, used to sign tokens.
public final class TestKey: @unchecked Sendable {
    public enum Kind: Sendable { case rsa, p256 }

    public let kind: Kind
    public let kid: String
    private let key: OpaquePointer

    public init(_ kind: Kind, kid: String) {
        self.kind = kind
        self.kid = kid
        let context = EVP_PKEY_CTX_new_from_name(nil, kind == .rsa ? "RSA" : "EC", nil)!
        defer { EVP_PKEY_CTX_free(context) }
        precondition(EVP_PKEY_keygen_init(context) == 1)
        switch kind {
        case .rsa: precondition(EVP_PKEY_CTX_set_rsa_keygen_bits(context, 2048) == 1)
        case .p256: precondition(EVP_PKEY_CTX_set_group_name(context, "P-256") == 1)
        }
        var key: OpaquePointer?
        precondition(EVP_PKEY_generate(context, &key) == 1)
        self.key = key!
    }

    deinit { EVP_PKEY_free(key) }

    /// The public key as a JWK.
    public var jwk: [String: String] {
        switch kind {
        case .rsa:
            return ["kty": "RSA", "kid": kid, "alg": "RS256", "use": "sig",
                    "n": base64url(bignum("n", width: 256)), "e": base64url(bignum("e", width: 3))]
        case .p256:
            var point = [UInt8](repeating: 0, count: 65)
            var length = 0
            precondition(EVP_PKEY_get_octet_string_param(key, "encoded-pub-key", &point, 65, &length) == 1 && length == 65)
            return ["kty": "EC", "kid": kid, "crv": "P-256", "alg": "ES256",
                    "x": base64url(Array(point[1..<33])), "y": base64url(Array(point[33..<65]))]
        }
    }

    /// The public key's DER (what an attacker would use as an HMAC secret).
    public var publicDER: [UInt8] {
        var pointer: UnsafeMutablePointer<UInt8>?
        let length = i2d_PUBKEY(key, &pointer)
        defer { CRYPTO_free(pointer, #file, #line) }
        return Array(UnsafeBufferPointer(start: pointer, count: Int(length)))
    }

    /// A JWS signature over `message` in JWT form (r||s for ES256).
    public func sign(_ message: [UInt8]) -> [UInt8] {
        let context = EVP_MD_CTX_new()!
        defer { EVP_MD_CTX_free(context) }
        precondition(EVP_DigestSignInit(context, nil, EVP_sha256(), nil, key) == 1)
        var length = 0
        precondition(EVP_DigestSign(context, nil, &length, message, message.count) == 1)
        var signature = [UInt8](repeating: 0, count: length)
        precondition(EVP_DigestSign(context, &signature, &length, message, message.count) == 1)
        signature = Array(signature.prefix(length))
        guard kind == .p256 else { return signature }
        var pointer: UnsafePointer<UInt8>? = nil
        let ecdsa = signature.withUnsafeBufferPointer { buffer -> OpaquePointer? in
            pointer = buffer.baseAddress
            return d2i_ECDSA_SIG(nil, &pointer, buffer.count)
        }!
        defer { ECDSA_SIG_free(ecdsa) }
        var raw = [UInt8](repeating: 0, count: 64)
        BN_bn2binpad(ECDSA_SIG_get0_r(ecdsa), &raw, 32)
        raw.withUnsafeMutableBufferPointer { _ = BN_bn2binpad(ECDSA_SIG_get0_s(ecdsa), $0.baseAddress! + 32, 32) }
        return raw
    }

    private func bignum(_ name: String, width: Int) -> [UInt8] {
        var number: OpaquePointer?
        precondition(EVP_PKEY_get_bn_param(key, name, &number) == 1)
        defer { BN_free(number) }
        var bytes = [UInt8](repeating: 0, count: Int((BN_num_bits(number) + 7) / 8))
        BN_bn2bin(number, &bytes)
        return bytes
    }
}

public func base64url(_ bytes: [UInt8]) -> String {
    Data(bytes).base64EncodedString().replacingOccurrences(of: "+", with: "-")
        .replacingOccurrences(of: "/", with: "_").replacingOccurrences(of: "=", with: "")
}

/// Builds compact JWS tokens for tests.
public enum TestToken {
    public static func make(header: [String: Any], claims: [String: Any], sign: ([UInt8]) -> [UInt8]) -> String {
        let head = base64url(Array(try! JSONSerialization.data(withJSONObject: header, options: .sortedKeys)))
        let body = base64url(Array(try! JSONSerialization.data(withJSONObject: claims, options: .sortedKeys)))
        let signingInput = head + "." + body
        return signingInput + "." + base64url(sign(Array(signingInput.utf8)))
    }

    public static func hmac(_ secret: [UInt8], _ message: [UInt8]) -> [UInt8] {
        var digest = [UInt8](repeating: 0, count: 32)
        var length: UInt32 = 0
        _ = HMAC(EVP_sha256(), secret, Int32(secret.count), message, message.count, &digest, &length)
        return digest
    }

    /// Claims of a Supabase session token at `now`, optionally an agent's (client_id).
    public static func claims(user: UUID = UUID(), clientID: String? = nil, now: Date = Date()) -> [String: Any] {
        var claims: [String: Any] = [
            "sub": user.uuidString.lowercased(), "aud": "authenticated", "role": "authenticated",
            "email": "ada@example.com", "session_id": UUID().uuidString.lowercased(),
            "iat": Int(now.timeIntervalSince1970), "exp": Int(now.timeIntervalSince1970) + 3600,
            "iss": "http://127.0.0.1:54321/auth/v1",
        ]
        if let clientID { claims["client_id"] = clientID }
        return claims
    }
}
