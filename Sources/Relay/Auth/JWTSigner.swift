import Crypto
import JSON

/// Signs HS256 tokens like Supabase Auth does, for development (`whereabot token`) only:
/// production tokens come from Supabase Auth.
public enum JWTSigner {
    /// A compact HS256 JWS of `claims` (JSON object) with `secret`.
    public static func hs256(claims: JSONValue, secret: String) -> String {
        let header = Base64URL.encode(Array(#"{"alg":"HS256","typ":"JWT"}"#.utf8))
        let payload = Base64URL.encode(claims.bytes)
        let input = Array("\(header).\(payload)".utf8)
        let digest = Digest.hmacSHA256(key: Array(secret.utf8), input)
        return "\(header).\(payload).\(Base64URL.encode(digest))"
    }
}
