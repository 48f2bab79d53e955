import Crypto
import Foundation
import HTTPServer
import JSON

extension OAuthServer {
    /// `POST /oauth/register` (RFC 7591): a public (`none`) or confidential client, checked
    /// as `OAuthClient.fromMetadata` says; at most 20 per address an hour and 10,000 in all
    /// (unused ones are swept after `staleClientDays`).
    func register(_ request: HTTPRequest) async -> HTTPResponse {
        guard let json = JSONValue.parse(bytes: request.body) else {
            return OAuthError(code: "invalid_client_metadata", text: "The body must be a JSON object.", status: 400).response
        }
        guard let random = try? SecureRandom.bytes(16) else { return OAuthError.temporarilyUnavailable.response }
        let id = "wbc_" + random.map { String(format: "%02x", $0) }.joined()
        var secret: String?
        let checked = OAuthClient.fromMetadata(json, id: id, kind: .registered,
                                               allowedMethods: [.none, .secretPost, .secretBasic], defaultMethod: .secretBasic) { method in
            guard method != .none, let made = try? Self.secret("wbs_") else { return nil }
            secret = made
            return Self.digest(made)
        }
        let client: OAuthClient
        switch checked {
        case .success(let value): client = value
        case .failure(let refusal): return OAuthError(code: refusal.code, text: refusal.description, status: 400).response
        }
        do {
            switch try await database.registerOAuthClient(client, secretDigest: client.secretDigest,
                                                          from: AddressBudget.key(for: request.remoteAddress)) {
            case .registered: break
            case .addressFull:
                return OAuthError(code: "temporarily_unavailable", text: "Too many clients registered from this address; try again in an hour.",
                                  status: 429).response
            case .full:
                return OAuthError.temporarilyUnavailable.response
            }
        } catch {
            logger.failure("oauth_register_failed", error)
            return OAuthError.temporarilyUnavailable.response
        }
        logger.info("oauth_client_registered", ["client_id": client.id, "auth_method": client.authMethod.rawValue])
        var body: [String: JSONValue] = [
            "client_id": .string(client.id), "client_id_issued_at": .number(Double(Int(authenticator.clock.date.timeIntervalSince1970))),
            "client_name": .string(client.name), "redirect_uris": .array(client.redirectURIs.map(JSONValue.string)),
            "grant_types": .array(client.grantTypes.map(JSONValue.string)), "response_types": ["code"],
            "token_endpoint_auth_method": .string(client.authMethod.rawValue),
        ]
        if let secret {
            body["client_secret"] = .string(secret)
            body["client_secret_expires_at"] = 0
        }
        return OAuthError.json(201, .object(body))
    }

    /// `GET /oauth/grants`: the agents the signed-in person connected (Connected agents).
    func grants(_ request: HTTPRequest) async -> HTTPResponse {
        let person: PhoneIdentity
        switch await signedInPerson(request) {
        case .success(let value): person = value
        case .failure(let refusal): return refusal.response
        }
        do {
            let list = try await database.oauthGrants(user: person.userID)
            return HTTPResponse(status: 200, headers: OAuthError.noStore, body: Array(list.text.utf8))
        } catch {
            logger.failure("oauth_grants_failed", error)
            return OAuthError.temporarilyUnavailable.response
        }
    }

    /// `DELETE /oauth/grants/{id}`: disconnects one of the person's agents — its tokens fail
    /// on every instance within 5 s and its waiting requests end. 204, or 404.
    func disconnect(_ request: HTTPRequest, id text: Substring) async -> HTTPResponse {
        let person: PhoneIdentity
        switch await signedInPerson(request) {
        case .success(let value): person = value
        case .failure(let refusal): return refusal.response
        }
        guard let id = UUID(uuidString: String(text)) else { return .text(404, "Not Found") }
        do {
            guard try await database.disconnectAgent(user: person.userID, grant: id) else { return .text(404, "Not Found") }
            logger.info("oauth_grant_revoked", ["user": person.userID.uuidString.lowercased()])
            return HTTPResponse(status: 204)
        } catch {
            logger.failure("oauth_disconnect_failed", error)
            return OAuthError.temporarilyUnavailable.response
        }
    }
}
