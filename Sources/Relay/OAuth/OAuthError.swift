import HTTPServer
import JSON

/// An OAuth error as RFC 6749 §5.2 (token, revocation), RFC 7591 §3.2.2 (registration) and
/// RFC 8707 (`invalid_target`) name them: a stable code and a description that names no
/// token, code, verifier or secret.
struct OAuthError: Error, Equatable, Sendable, CustomStringConvertible {
    /// The error code (`invalid_request`, `invalid_client`, `invalid_grant`, ...).
    let code: String
    /// A human-readable description, for the developer of the client.
    let text: String
    /// The HTTP status (400, or 401 for a client that failed to authenticate).
    let status: Int

    var description: String { "\(code) (\(status)): \(text)" }

    static func invalidRequest(_ text: String) -> Self { Self(code: "invalid_request", text: text, status: 400) }
    static func invalidGrant(_ text: String) -> Self { Self(code: "invalid_grant", text: text, status: 400) }
    static func invalidScope(_ text: String) -> Self { Self(code: "invalid_scope", text: text, status: 400) }
    static let invalidClient = Self(code: "invalid_client", text: "Unknown client, or its authentication failed.", status: 401)
    static let unsupportedGrantType = Self(code: "unsupported_grant_type",
                                           text: "grant_type must be authorization_code or refresh_token.", status: 400)
    static let invalidTarget = Self(code: "invalid_target", text: "resource must be this relay's MCP endpoint.", status: 400)
    static let unauthorizedClient = Self(code: "unauthorized_client",
                                         text: "This client did not register the refresh_token grant.", status: 400)
    static let temporarilyUnavailable = Self(code: "temporarily_unavailable",
                                             text: "The authorization server cannot answer now. Try again shortly.", status: 503)

    /// The JSON error response; never cached (RFC 6749 §5.1). 401 carries `WWW-Authenticate`
    /// for the client authentication scheme that failed.
    var response: HTTPResponse {
        let body: JSONValue = ["error": .string(code), "error_description": .string(text)]
        var response = OAuthError.json(status, body)
        if status == 401 { response.headers.set("WWW-Authenticate", "Basic realm=\"whereabot\"") }
        if status == 503 || status == 429 { response.headers.set("Retry-After", "5") }
        return response
    }

    /// The headers of every token-endpoint answer: JSON, never cached.
    static let noStore: HTTPHeaders = ["Content-Type": "application/json", "Cache-Control": "no-store", "Pragma": "no-cache"]

    /// A JSON answer with `noStore`'s headers.
    static func json(_ status: Int, _ body: JSONValue) -> HTTPResponse {
        HTTPResponse(status: status, headers: noStore, body: body.bytes)
    }
}
