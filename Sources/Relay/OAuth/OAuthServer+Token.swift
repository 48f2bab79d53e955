import Foundation
import HTTPServer
import JSON

extension OAuthServer {
    /// `POST /oauth/token`: the `authorization_code` and `refresh_token` grants (RFC 6749
    /// §4.1.3, §6; OAuth 2.1), answers and errors as JSON that is never cached.
    func token(_ request: HTTPRequest) async -> HTTPResponse {
        do {
            let form = try Self.form(request)
            let client = try await authenticateClient(request, form: form)
            switch form["grant_type"] {
            case "authorization_code": return try await redeem(form, client: client)
            case "refresh_token": return try await refresh(form, client: client)
            default: throw OAuthError.unsupportedGrantType
            }
        } catch let error as OAuthError {
            if error.code == "invalid_client" { logger.info("oauth_client_refused", [:]) }
            return error.response
        } catch {
            logger.failure("oauth_token_failed", error)
            return OAuthError.temporarilyUnavailable.response
        }
    }

    /// The form of a token or revocation request (`application/x-www-form-urlencoded`).
    static func form(_ request: HTTPRequest) throws(OAuthError) -> FormFields {
        let type = request.headers["Content-Type"]?.split(separator: ";").first.map { String($0).lowercased() }
        guard type?.trimmingCharacters(in: .whitespaces) == "application/x-www-form-urlencoded" else {
            throw .invalidRequest("The body must be application/x-www-form-urlencoded.")
        }
        guard let form = FormFields(body: request.body) else {
            throw .invalidRequest("A parameter is repeated, or there are too many.")
        }
        return form
    }

    private func redeem(_ form: FormFields, client: OAuthClient) async throws -> HTTPResponse {
        guard let code = form["code"], !code.isEmpty, code.utf8.count <= 100 else { throw OAuthError.invalidRequest("code is missing.") }
        guard let redirect = form["redirect_uri"], !redirect.isEmpty else {
            throw OAuthError.invalidRequest("redirect_uri is missing.")
        }
        guard let verifier = form["code_verifier"], let challenge = PKCE.challenge(ofVerifier: verifier) else {
            throw OAuthError.invalidGrant("code_verifier is missing or malformed.")
        }
        let named = try checkedResource(form["resource"])
        // The database keeps the refresh token only when the grant earns one (`refresh`).
        let refreshToken = try Self.secret("wbrt_")
        let outcome = try await database.redeemCode(digest: Self.digest(code), clientID: client.id, redirectURI: redirect,
                                                    challenge: challenge, resource: named, family: UUID(),
                                                    refreshDigest: Self.digest(refreshToken),
                                                    seconds: settings.refreshTokenDays * 86_400)
        return try await issue(outcome, client: client, resource: named, refreshToken: refreshToken)
    }

    private func refresh(_ form: FormFields, client: OAuthClient) async throws -> HTTPResponse {
        guard let token = form["refresh_token"], !token.isEmpty, token.utf8.count <= 100 else {
            throw OAuthError.invalidRequest("refresh_token is missing.")
        }
        let named = try checkedResource(form["resource"])
        let next = try Self.secret("wbrt_")
        let outcome = try await database.refresh(digest: Self.digest(token), clientID: client.id, newDigest: Self.digest(next),
                                                 seconds: settings.refreshTokenDays * 86_400)
        return try await issue(outcome, client: client, resource: named, refreshToken: next)
    }

    private func checkedResource(_ named: String?) throws(OAuthError) -> String? {
        guard let named else { return nil }
        guard resources.contains(named) else { throw .invalidTarget }
        return named
    }

    /// The token response for a family, or the error its redemption came to.
    private func issue(_ outcome: RelayDatabase.Redemption, client: OAuthClient, resource: String?, refreshToken: String?)
        async throws -> HTTPResponse {
        let family: OAuthFamily
        switch outcome {
        case .family(let value): family = value
        case .refused(let code):
            logger.info("oauth_grant_refused", ["client_id": client.id, "error": code])
            throw code == "invalid_target" ? OAuthError.invalidTarget
                : OAuthError.invalidGrant("The code or refresh token is invalid, expired, revoked or was already used.")
        }
        guard let tokens = await authenticator.accessTokens() else { throw OAuthError.temporarilyUnavailable }
        let access = try tokens.sign(family, resource: resource ?? family.resource, lifetime: settings.accessTokenSeconds,
                                     now: authenticator.clock.date)
        var body: [String: JSONValue] = ["access_token": .string(access), "token_type": "Bearer",
                                         "expires_in": .number(Double(settings.accessTokenSeconds)), "scope": .string(family.scope)]
        if family.refresh, let refreshToken { body["refresh_token"] = .string(refreshToken) }
        logger.info("oauth_token_issued", ["client_id": client.id, "user": family.userID.uuidString.lowercased()])
        return OAuthError.json(200, .object(body))
    }

    /// `POST /oauth/revoke` (RFC 7009): a refresh token or an access token of the client
    /// ends its family (every token of that sign-in). 200 whatever the token was; 401 for
    /// a client that fails to authenticate.
    func revoke(_ request: HTTPRequest) async -> HTTPResponse {
        do {
            let form = try Self.form(request)
            let client = try await authenticateClient(request, form: form)
            guard let token = form["token"], !token.isEmpty else { throw OAuthError.invalidRequest("token is missing.") }
            if token.hasPrefix("wbrt_") {
                _ = try await database.revokeOAuth(refreshDigest: Self.digest(token), family: nil, clientID: client.id)
            } else if let tokens = await authenticator.accessTokens(), let claims = try? tokens.verifier.verify(token, now: authenticator.clock.date) {
                _ = try await database.revokeOAuth(refreshDigest: nil, family: claims.sessionID, clientID: client.id)
            }
            return HTTPResponse(status: 200, headers: OAuthError.noStore, body: Array("{}".utf8))
        } catch let error as OAuthError {
            return error.response
        } catch {
            logger.failure("oauth_revoke_failed", error)
            return OAuthError.temporarilyUnavailable.response
        }
    }
}
