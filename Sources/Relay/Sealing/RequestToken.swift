import Crypto
import Foundation
import RelayCore

/// The `request_id` (and MCP task id) of a resumable request: `wbr_` and 32 base64url
/// characters of a 192-bit secret that Postgres never sees (docs/protocol.md, "Durable requests").
///
/// Everything else follows from the secret: the row's id (a hash of it, so Postgres finds
/// the row by a hash and cannot recompute the token) and the X25519 reply key the phone's
/// instance seals the fix to. So only an instance presented with the token can open the
/// result. Logs name a request by `tag`, a short prefix of the row id's hash, never whole.
public struct RequestToken: Sendable, Hashable {
    /// The secret's length in bytes.
    public static let secretBytes = 24
    /// What every token starts with.
    public static let prefix = "wbr_"
    /// A token's length in characters.
    public static let length = prefix.count + 32

    /// The secret itself.
    let secret: [UInt8]
    /// The request's row id, derived from the secret.
    public let id: UUID

    /// A fresh token.
    public init() throws {
        try self.init(secret: SecureRandom.bytes(Self.secretBytes))
    }

    /// The token of `secret` (24 bytes).
    init(secret: [UInt8]) throws {
        guard secret.count == Self.secretBytes else { throw CryptoError.badKey }
        self.secret = secret
        let bytes = try HKDF.sha256(secret: secret, salt: [], info: Array("whereabot request id v1".utf8), length: 16)
        id = UUID(uuid: (bytes[0], bytes[1], bytes[2], bytes[3], bytes[4], bytes[5], bytes[6], bytes[7],
                         bytes[8], bytes[9], bytes[10], bytes[11], bytes[12], bytes[13], bytes[14], bytes[15]))
    }

    /// Parses a token an agent sent; nil for anything that is not exactly one.
    public init?(parsing text: some StringProtocol) {
        guard text.utf8.count == Self.length, text.hasPrefix(Self.prefix),
              let secret = Base64URL.decode(text.dropFirst(Self.prefix.count)), secret.count == Self.secretBytes,
              Base64URL.encode(secret) == text.dropFirst(Self.prefix.count) else { return nil }
        try? self.init(secret: secret)
    }

    /// The token as the agent gets it.
    public var text: String { Self.prefix + Base64URL.encode(secret) }

    /// How logs name the request: 12 hex digits of the row id (itself a hash of the secret).
    public var tag: String { String(id.uuidString.lowercased().replacingOccurrences(of: "-", with: "").prefix(12)) }

    /// The reply key the request's fix is sealed to.
    public func replyKey() throws -> ReplyKey {
        try ReplyKey(privateKey: HKDF.sha256(secret: secret, salt: [], info: Array("whereabot reply key v1".utf8), length: 32))
    }

    /// The secret sealed under `key` (32 bytes, the instances' REQUEST_ID_KEY), so that
    /// tasks/list can name the request again; 12-byte nonce | ciphertext | tag.
    public func wrapped(under key: [UInt8]) throws -> [UInt8] {
        let nonce = try SecureRandom.bytes(12)
        return nonce + (try AESGCM.seal(secret, key: key, nonce: nonce, aad: Self.wrapAAD(id)))
    }

    /// Unwraps a secret `wrapped` gave for row `id`; nil when it was not wrapped under `key`
    /// or belongs to another row.
    public static func unwrap(_ wrapped: [UInt8], under key: [UInt8], id: UUID) -> RequestToken? {
        guard wrapped.count > 12, let secret = try? AESGCM.open(Array(wrapped[12...]), key: key, nonce: Array(wrapped[..<12]),
                                                              aad: wrapAAD(id)),
              let token = try? RequestToken(secret: secret), token.id == id else { return nil }
        return token
    }

    private static func wrapAAD(_ id: UUID) -> [UInt8] { Array("whereabot wrapped request \(id.uuidString.lowercased())".utf8) }
}

extension RequestToken: CustomStringConvertible {
    /// Never the secret: the tag.
    public var description: String { "request \(tag)" }
}
