import Crypto

/// Agent keys (`wb_` + 64 hex digits): recognized by shape, looked up only by SHA-256.
public enum AgentKey {
    /// Whether `credential` has the shape of an agent key.
    public static func looksLikeKey(_ credential: String) -> Bool {
        credential.hasPrefix("wb_") && credential.utf8.count == 67
            && credential.utf8.dropFirst(3).allSatisfy { (48...57).contains($0) || (97...102).contains($0) }
    }

    /// Whether `key` (of the agent-key shape) carries a valid signature under `secret`: its
    /// last 32 hex digits are the first 16 bytes of HMAC-SHA-256 over the rest
    /// (`private.create_agent_key_for`). A forged key fails this without the database; keys
    /// made before signing fail it too and are looked up the old way.
    public static func isSigned(_ key: String, secret: [UInt8]) -> Bool {
        guard looksLikeKey(key), !secret.isEmpty else { return false }
        let bytes = Array(key.utf8)
        let mac = Digest.hmacSHA256(key: secret, Array(bytes[..<35])).prefix(16)
        let hex = Array("0123456789abcdef".utf8)
        let expected = mac.flatMap { [hex[Int($0 >> 4)], hex[Int($0 & 0x0F)]] }
        return Digest.constantTimeEqual(expected, Array(bytes[35...]))
    }

    /// The lowercase hex SHA-256 of the key, as `agent_keys.key_hash` stores it.
    public static func hash(_ key: String) -> String {
        let digest = Digest.sha256(Array(key.utf8))
        let hex = Array("0123456789abcdef".utf8)
        return String(decoding: digest.flatMap { [hex[Int($0 >> 4)], hex[Int($0 & 0x0F)]] }, as: UTF8.self)
    }
}
