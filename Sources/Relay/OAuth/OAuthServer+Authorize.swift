import Crypto
import Foundation
import HTTPServer
import JSON

extension OAuthServer {
    /// `GET /oauth/authorize`. Until the client and its redirect URI are verified, errors
    /// are a page for the person (never a redirect to an unverified URI); after that they go
    /// back to the client with `error`, `state` and `iss`. Success: the person goes to the
    /// consent page with the request's id.
    func authorize(_ request: HTTPRequest) async -> HTTPResponse {
        guard let query = FormFields(request.query ?? "") else {
            return Self.errorPage("This request to connect an agent repeats a parameter or has too many.")
        }
        guard let clientID = query["client_id"], !clientID.isEmpty else {
            return Self.errorPage("This request to connect an agent names no client.")
        }
        let client: OAuthClient
        switch await knownClient(clientID) {
        case .success(let found): client = found
        case .failure(let refusal): return refusal.response
        }
        let redirect: String
        if let requested = query["redirect_uri"] {
            guard let matched = client.redirectURI(matching: requested) else {
                return Self.errorPage("This agent asked to return to an address it did not register, so it cannot be connected.")
            }
            redirect = matched
        } else {
            guard client.redirectURIs.count == 1 else {
                return Self.errorPage("This request to connect an agent names no return address.")
            }
            redirect = client.redirectURIs[0]
        }
        let state = query["state"]
        func back(_ error: String, _ text: String) -> HTTPResponse {
            found(redirect, ["error": error, "error_description": text, "state": state])
        }
        guard query["response_type"] == "code" else {
            return back("unsupported_response_type", "response_type must be code.")
        }
        guard let challenge = query["code_challenge"], PKCE.isChallenge(challenge), query["code_challenge_method"] == "S256" else {
            return back("invalid_request", "PKCE with code_challenge_method S256 is required.")
        }
        guard (state?.utf8.count ?? 0) <= 1000 else { return back("invalid_request", "state is longer than 1000 bytes.") }
        let resource: String
        switch self.resource(query["resource"]) {
        case .success(let value): resource = value
        case .failure(let error): return back(error.code, error.text)
        }
        // Scopes the relay does not know are left out (RFC 6749 §3.3); `location` is what
        // every grant is for.
        let asked = Set((query["scope"] ?? "").split(separator: " ").map(String.init))
        let scope = (["location"] + (asked.contains("offline_access") ? ["offline_access"] : [])).joined(separator: " ")
        let authorization = OAuthAuthorization(
            id: UUID(), client: client,
            clientHost: RedirectURI.displayHost(client.kind == .document ? client.id : redirect),
            redirectURI: redirect, codeChallenge: challenge, state: state, scope: scope, resource: resource)
        do {
            guard try await database.beginAuthorization(authorization, seconds: settings.authorizationSeconds) else {
                return back("temporarily_unavailable", "Too many requests to connect agents are waiting. Try again shortly.")
            }
        } catch {
            logger.failure("oauth_authorize_failed", error)
            return back("temporarily_unavailable", "The authorization server cannot answer now. Try again shortly.")
        }
        return HTTPResponse(status: 302, headers: ["Location": "/app/oauth/consent?request=\(authorization.id.uuidString.lowercased())",
                                                   "Cache-Control": "no-store"])
    }

    /// The client `clientID` names: its metadata document (fetched, or cached) or a
    /// registered client; else the page that says why not.
    private func knownClient(_ clientID: String) async -> Result<OAuthClient, Refusal> {
        if ClientDocuments.isDocumentURL(clientID) {
            switch await documents.client(at: clientID) {
            case .success(let client):
                do {
                    try await database.rememberClientDocument(client)
                } catch {
                    logger.failure("oauth_document_remember_failed", error)
                    return .failure(Refusal(response: Self.errorPage("The relay cannot answer now. Try again shortly.", status: 503)))
                }
                return .success(client)
            case .failure(let failure):
                logger.info("oauth_document_refused", ["reason": failure.reason])
                return .failure(Refusal(response: Self.errorPage("This agent's description could not be used: \(failure.reason).")))
            }
        }
        do {
            guard let client = try await database.oauthClient(id: clientID), client.kind == .registered else {
                return .failure(Refusal(response: Self.errorPage("This agent is not known here. It must register (or name its metadata document) first.")))
            }
            return .success(client)
        } catch {
            logger.failure("oauth_client_lookup_failed", error)
            return .failure(Refusal(response: Self.errorPage("The relay cannot answer now. Try again shortly.", status: 503)))
        }
    }

    /// 302 to `uri` with `parameters` (nil values left out) and `iss` (RFC 9207).
    func found(_ uri: String, _ parameters: KeyValuePairs<String, String?>) -> HTTPResponse {
        HTTPResponse(status: 302, headers: ["Location": Self.url(uri, parameters, issuer: issuer), "Cache-Control": "no-store"])
    }

    /// `uri` with `parameters` and `iss` appended to its query.
    static func url(_ uri: String, _ parameters: KeyValuePairs<String, String?>, issuer: String) -> String {
        var allowed = CharacterSet.alphanumerics
        allowed.insert(charactersIn: "-._~")
        let items = (parameters.compactMap { name, value in value.map { (name, $0) } } + [("iss", issuer)])
            .map { "\($0.0)=\($0.1.addingPercentEncoding(withAllowedCharacters: allowed) ?? "")" }
        return uri + (uri.contains("?") ? "&" : "?") + items.joined(separator: "&")
    }

    /// A plain page for the person when the agent cannot be sent back (RFC 6749 §4.1.2.1).
    static func errorPage(_ text: String, status: Int = 400) -> HTTPResponse {
        let escaped = text.replacingOccurrences(of: "&", with: "&amp;").replacingOccurrences(of: "<", with: "&lt;")
            .replacingOccurrences(of: ">", with: "&gt;").replacingOccurrences(of: "\"", with: "&quot;")
        let page = "<!doctype html><meta charset=utf-8><meta name=viewport content=\"width=device-width\">"
            + "<title>Cannot connect this agent</title><h1>Cannot connect this agent</h1><p>\(escaped)</p>"
        return HTTPResponse(status: status, headers: ["Content-Type": "text/html; charset=utf-8", "Cache-Control": "no-store",
                                                      "Content-Security-Policy": "default-src 'none'; frame-ancestors 'none'"],
                            body: Array(page.utf8))
    }

    /// `GET /oauth/consent/{id}`: what the consent page shows — the client's name and host,
    /// the person's email — and the one-time token its Approve or Deny must carry.
    func consentDetails(_ request: HTTPRequest, id text: Substring) async -> HTTPResponse {
        let (person, id): (PhoneIdentity, UUID)
        switch await consentRequest(request, id: text) {
        case .success(let value): (person, id) = value
        case .failure(let refusal): return refusal.response
        }
        let details: JSONValue?
        do {
            details = try await database.consentRequest(id: id)
        } catch {
            logger.failure("oauth_consent_failed", error)
            return OAuthError.temporarilyUnavailable.response
        }
        guard case .object(var object)? = details, let tokens = await authenticator.accessTokens() else { return Self.expired }
        object["email"] = JSONValue(person.email)
        object["consent_token"] = .string(tokens.consentToken(request: id, user: person.userID))
        return OAuthError.json(200, .object(object))
    }

    /// `POST /oauth/consent/{id}` with `{"action": "approve"|"deny", "consent_token"}`:
    /// decides the request once and answers where the browser goes (`redirect_url`).
    func consentDecision(_ request: HTTPRequest, id text: Substring) async -> HTTPResponse {
        let (person, id): (PhoneIdentity, UUID)
        switch await consentRequest(request, id: text) {
        case .success(let value): (person, id) = value
        case .failure(let refusal): return refusal.response
        }
        guard let body = JSONValue.parse(bytes: request.body), let action = body["action"]?.string,
              action == "approve" || action == "deny", let token = body["consent_token"]?.string else {
            return OAuthError.invalidRequest("The body is {\"action\": \"approve\" or \"deny\", \"consent_token\": …}.").response
        }
        guard let tokens = await authenticator.accessTokens() else { return OAuthError.temporarilyUnavailable.response }
        guard Digest.constantTimeEqual(Array(token.utf8), Array(tokens.consentToken(request: id, user: person.userID).utf8)) else {
            return OAuthError.json(403, ["error": "forbidden", "error_description": "This approval is not for this request."])
        }
        do {
            if action == "deny" {
                guard let target = try await database.decideAuthorization(id: id, user: person.userID, approve: false,
                                                                          codeDigest: nil, codeSeconds: OAuthSettings.codeSeconds)
                else { return Self.expired }
                let url = Self.url(target.redirectURI, ["error": "access_denied", "state": target.state], issuer: issuer)
                return OAuthError.json(200, ["redirect_url": .string(url)])
            }
            let code = try Self.secret("wbk_")
            guard let target = try await database.decideAuthorization(id: id, user: person.userID, approve: true,
                                                                      codeDigest: Self.digest(code),
                                                                      codeSeconds: OAuthSettings.codeSeconds)
            else { return Self.expired }
            logger.info("oauth_approved", ["user": person.userID.uuidString.lowercased()])
            let url = Self.url(target.redirectURI, ["code": code, "state": target.state], issuer: issuer)
            return OAuthError.json(200, ["redirect_url": .string(url)])
        } catch {
            logger.failure("oauth_consent_failed", error)
            return OAuthError.temporarilyUnavailable.response
        }
    }

    /// The signed-in person and the request id a consent call names, or its refusal (401,
    /// 429, 503; 404 for an id that is not one).
    private func consentRequest(_ request: HTTPRequest, id text: Substring) async -> Result<(PhoneIdentity, UUID), Refusal> {
        switch await signedInPerson(request) {
        case .success(let person):
            guard let id = UUID(uuidString: String(text)) else { return .failure(Refusal(response: Self.expired)) }
            return .success((person, id))
        case .failure(let refusal):
            return .failure(refusal)
        }
    }

    /// 404 for a request that is unknown, expired or already decided.
    static let expired = OAuthError.json(404, ["error": "not_found",
                                               "error_description": "This request to connect an agent has expired or was already answered."])
}
