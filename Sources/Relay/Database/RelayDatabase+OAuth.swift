import Foundation
import JSON
import PGBus

/// The relay as the agents' authorization server (`OAuthServer`): clients, authorization
/// requests, codes, token families and grants, through `relay.oauth_*`
/// (35_relay_oauth_server.sql). Codes and tokens cross as SHA-256 digests only.
extension RelayDatabase {
    /// What `relay.oauth_register_client` answered.
    enum Registration: String {
        case registered, addressFull = "address_full", full
    }

    /// Registers a client (RFC 7591), within the per-address and total bounds.
    func registerOAuthClient(_ client: OAuthClient, secretDigest: [UInt8]?, from address: String) async throws -> Registration {
        let word = try await pool.send("select relay.oauth_register_client($1, $2, $3, $4, $5, $6, $7)",
                                       [client.id, client.name, client.redirectURIs, client.grantTypes,
                                        client.authMethod.rawValue, secretDigest.map { Data($0) }, address]).scalar(String.self)
        guard let registration = Registration(rawValue: word) else { throw Self.malformed("oauth_register_client") }
        return registration
    }

    /// Keeps what a fetched client metadata document says.
    func rememberClientDocument(_ client: OAuthClient) async throws {
        _ = try await pool.send("select relay.oauth_remember_document($1, $2, $3, $4, $5)",
                                [client.id, client.name, client.redirectURIs, client.grantTypes, client.authMethod.rawValue])
    }

    /// A client the relay knows (registered, or a document fetched before), or nil.
    func oauthClient(id: String) async throws -> OAuthClient? {
        guard let json = try await pool.send("select relay.oauth_client($1)", [id]).scalar(PGJSON?.self) else { return nil }
        guard let client = OAuthClient(stored: try json.parsed(), id: id) else { throw Self.malformed("oauth_client") }
        return client
    }

    /// Keeps an authorization request until the person decides; false when too many wait.
    func beginAuthorization(_ request: OAuthAuthorization, seconds: Int) async throws -> Bool {
        let word = try await pool.send("select relay.oauth_begin($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)",
                                       [request.id, request.client.id, request.client.name, request.clientHost,
                                        request.redirectURI, request.codeChallenge, request.state, request.scope,
                                        request.resource, seconds]).scalar(String.self)
        return word == "ok"
    }

    /// What the consent page shows of an undecided, unexpired request, or nil.
    func consentRequest(id: UUID) async throws -> JSONValue? {
        try await pool.send("select relay.oauth_consent_request($1)", [id]).scalar(PGJSON?.self)?.parsed()
    }

    /// The person's decision, once: where to send the browser (`redirect_uri`, `state`), or
    /// nil when the request cannot be decided (unknown, expired, decided, or the person may
    /// not sign in).
    func decideAuthorization(id: UUID, user: UUID, approve: Bool, codeDigest: [UInt8]?, codeSeconds: Int) async throws
        -> (redirectURI: String, state: String?)? {
        guard let json = try await pool.send("select relay.oauth_decide($1, $2, $3, $4, $5)",
                                             [id, user, approve, codeDigest.map { Data($0) }, codeSeconds])
            .scalar(PGJSON?.self)?.parsed() else { return nil }
        guard let uri = json["redirect_uri"]?.string else { throw Self.malformed("oauth_decide") }
        return (uri, json["state"]?.string)
    }

    /// What a code or refresh token redeemed into: the family an access token names, or the
    /// OAuth error code (`invalid_grant`, `invalid_target`).
    enum Redemption {
        case family(OAuthFamily)
        case refused(String)
    }

    /// Redeems an authorization code (single use; a second use revokes its family).
    func redeemCode(digest: [UInt8], clientID: String, redirectURI: String, challenge: String, resource: String?,
                    family: UUID, refreshDigest: [UInt8]?, seconds: Int) async throws -> Redemption {
        try Self.redemption(try await pool.send("select relay.oauth_redeem_code($1, $2, $3, $4, $5, $6, $7, $8)",
                                                [Data(digest), clientID, redirectURI, challenge, resource, family,
                                                 refreshDigest.map { Data($0) }, seconds]).scalar(PGJSON.self).parsed(),
                            from: "oauth_redeem_code")
    }

    /// Rotates a refresh token (a reused one revokes its family).
    func refresh(digest: [UInt8], clientID: String, newDigest: [UInt8], seconds: Int) async throws -> Redemption {
        try Self.redemption(try await pool.send("select relay.oauth_refresh($1, $2, $3, $4)",
                                                [Data(digest), clientID, Data(newDigest), seconds]).scalar(PGJSON.self).parsed(),
                            from: "oauth_refresh")
    }

    private static func redemption(_ json: JSONValue, from function: String) throws -> Redemption {
        if let error = json["error"]?.string { return .refused(error) }
        guard let family = OAuthFamily(json) else { throw malformed(function) }
        return .family(family)
    }

    /// Revokes the family of a refresh token (its digest) or of an access token (`family`),
    /// if it is `clientID`'s; whether one ended.
    func revokeOAuth(refreshDigest: [UInt8]?, family: UUID?, clientID: String) async throws -> Bool {
        try await pool.send("select relay.oauth_revoke($1, $2, $3)", [refreshDigest.map { Data($0) }, family, clientID])
            .scalar(Bool.self)
    }

    /// The agents `user` connected (Connected agents).
    func oauthGrants(user: UUID) async throws -> PGJSON {
        try await pool.send("select relay.oauth_grants($1)", [user]).scalar(PGJSON.self)
    }

    /// Disconnects one of `user`'s agents; whether it existed.
    func disconnectAgent(user: UUID, grant: UUID) async throws -> Bool {
        try await pool.send("select relay.oauth_disconnect($1, $2)", [user, grant]).scalar(Bool.self)
    }

    /// Deletes up to `limit` each of expired authorizations, ended families and unused clients.
    func sweepOAuth(staleDays: Int, limit: Int) async throws -> Int {
        try await pool.send("select relay.sweep_oauth($1, $2)", [staleDays, limit]).scalar(Int.self)
    }
}
