import Crypto
import Foundation
import HTTPServer
import JSON

/// The relay as the OAuth 2.1 authorization server for agents (docs/agents.md, "Signing
/// in"): RFC 8414 metadata, clients registered (RFC 7591) or named by a metadata document
/// (CIMD), authorization with PKCE S256 and the person's consent on `/app/oauth/consent`
/// (signed in with Supabase Auth), codes of 60 s used once, access tokens bound to the
/// resource (RFC 8707), refresh tokens rotated with reuse detection, revocation (RFC 7009),
/// and the person's Connected agents. The database keeps codes and tokens as SHA-256
/// digests only; no token, code, verifier or secret is ever logged.
struct OAuthServer: Sendable {
    let database: RelayDatabase
    let authenticator: Authenticator
    let documents: ClientDocuments
    let settings: OAuthSettings
    /// The issuer: `PUBLIC_URL`.
    let issuer: String
    let logger: Logger

    /// The RFC 8414 document (also served as `/.well-known/openid-configuration`).
    var metadata: HTTPResponse {
        let document: JSONValue = [
            "issuer": .string(issuer),
            "authorization_endpoint": .string(issuer + "/oauth/authorize"),
            "token_endpoint": .string(issuer + "/oauth/token"),
            "registration_endpoint": .string(issuer + "/oauth/register"),
            "revocation_endpoint": .string(issuer + "/oauth/revoke"),
            "response_types_supported": ["code"],
            "response_modes_supported": ["query"],
            "grant_types_supported": ["authorization_code", "refresh_token"],
            "code_challenge_methods_supported": ["S256"],
            "token_endpoint_auth_methods_supported": ["none", "client_secret_post", "client_secret_basic"],
            "revocation_endpoint_auth_methods_supported": ["none", "client_secret_post", "client_secret_basic"],
            "scopes_supported": .array(OAuthSettings.scopesSupported.map(JSONValue.string)),
            "client_id_metadata_document_supported": true,
            "authorization_response_iss_parameter_supported": true,
        ]
        return HTTPResponse(status: 200, headers: ["Content-Type": "application/json", "Cache-Control": "max-age=300"],
                            body: document.bytes)
    }

    /// The resources a client may name (`resource`), as `AccessTokens` binds them.
    var resources: [String] { AccessTokens.resources(publicURL: issuer) }

    /// The resource a token is for: the one named (checked), else the `/mcp` endpoint.
    func resource(_ named: String?) -> Result<String, OAuthError> {
        guard let named else { return .success(issuer + "/mcp") }
        return resources.contains(named) ? .success(named) : .failure(.invalidTarget)
    }

    /// A fresh secret: `prefix` and 32 random bytes in base64url.
    static func secret(_ prefix: String) throws -> String {
        prefix + Base64URL.encode(try SecureRandom.bytes(32))
    }

    /// SHA-256 of a code, token or secret, as the database keeps it.
    static func digest(_ text: String) -> [UInt8] { Digest.sha256(Array(text.utf8)) }

    /// The client a token or revocation request authenticates as: HTTP Basic (RFC 6749
    /// §2.3.1, each part form-decoded) or `client_id` (and `client_secret`) in the body;
    /// a confidential client's secret must match, a public client sends none that counts.
    func authenticateClient(_ request: HTTPRequest, form: FormFields) async throws(OAuthError) -> OAuthClient {
        var id = form["client_id"]
        var secret = form["client_secret"]
        if let header = request.headers["Authorization"] {
            guard header.prefix(6).lowercased() == "basic ", let decoded = Data(base64Encoded: String(header.dropFirst(6))),
                  let text = String(data: decoded, encoding: .utf8), let colon = text.firstIndex(of: ":"),
                  let basicID = FormFields(Substring("i=" + text[..<colon]))?["i"],
                  let basicSecret = FormFields(Substring("s=" + text[text.index(after: colon)...]))?["s"] else {
                throw .invalidClient
            }
            guard id == nil || id == basicID, secret == nil else {
                throw .invalidRequest("Authenticate the client one way only: HTTP Basic or the body.")
            }
            id = basicID
            secret = basicSecret
        }
        guard let id, !id.isEmpty, id.utf8.count <= 255 else { throw .invalidClient }
        let client: OAuthClient?
        do {
            client = try await database.oauthClient(id: id)
        } catch {
            logger.failure("oauth_client_lookup_failed", error)
            throw .temporarilyUnavailable
        }
        guard let client else { throw .invalidClient }
        if let digest = client.secretDigest {
            guard let secret, Digest.constantTimeEqual(Self.digest(secret), digest) else { throw .invalidClient }
        }
        return client
    }

    /// The person signed in on the consent page or in `/app/` (their Supabase session), or
    /// the JSON refusal.
    func signedInPerson(_ request: HTTPRequest) async -> Result<PhoneIdentity, Refusal> {
        do {
            return .success(try await authenticator.phone(request.headers["Authorization"], client: request.remoteAddress))
        } catch AuthError.unavailable {
            return .failure(Refusal(response: OAuthError.temporarilyUnavailable.response))
        } catch AuthError.rateLimited {
            let seconds = await authenticator.retryAfter(client: request.remoteAddress)
            return .failure(Refusal(response: RelayError.rateLimited(retryAfter: seconds).response))
        } catch {
            return .failure(Refusal(response: OAuthError.json(401, ["error": "unauthorized", "error_description": "Sign in again."])))
        }
    }

    /// A request refused before its work, as its response.
    struct Refusal: Error {
        let response: HTTPResponse
    }
}
