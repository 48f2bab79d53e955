import Crypto
import JSON

/// Signs HS256 tokens: like Supabase Auth does, for development (`whereabot token`), and
/// the relay's own access tokens (`AccessTokens`).
public enum JWTSigner {
    /// A compact HS256 JWS of `claims` (JSON object) with `secret`.
    public static func hs256(claims: JSONValue, secret: String) -> String {
        hs256(claims: claims, key: Array(secret.utf8))
    }

    /// A compact HS256 JWS of `claims` (JSON object) with the key's bytes.
    public static func hs256(claims: JSONValue, key: [UInt8]) -> String {
        let header = Base64URL.encode(Array(#"{"alg":"HS256","typ":"JWT"}"#.utf8))
        let payload = Base64URL.encode(claims.bytes)
        let input = Array("\(header).\(payload)".utf8)
        return "\(header).\(payload).\(Base64URL.encode(Digest.hmacSHA256(key: key, input)))"
    }
}
