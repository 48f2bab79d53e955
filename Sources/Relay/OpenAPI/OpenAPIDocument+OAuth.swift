import RelayCore

/// The agents' authorization server in the OpenAPI document (docs/agents.md, "Signing in"):
/// its metadata, authorize, token, registration and revocation, and the person's consent
/// and Connected agents. Errors are RFC 6749 JSON, but for the pages of /oauth/authorize.
extension OpenAPIDocument {
    static var oauthPaths: [(String, YAML)] {
        [
            ("/.well-known/oauth-authorization-server", .map([("get", serverMetadata)])),
            ("/.well-known/openid-configuration", .map([("get", serverMetadata)])),
            ("/oauth/authorize", .map([("get", authorize)])),
            ("/oauth/token", .map([("post", tokenEndpoint)])),
            ("/oauth/register", .map([("post", register)])),
            ("/oauth/revoke", .map([("post", revoke)])),
            ("/oauth/consent/{request}", .map([("get", consentDetails), ("post", consentDecision)])),
            ("/oauth/grants", .map([("get", grants)])),
            ("/oauth/grants/{grant}", .map([("delete", disconnect)])),
        ]
    }

    static var oauthSchemas: [(String, YAML)] {
        [
            ("OAuthError", object(["error"], [("error", string), ("error_description", string)])),
            ("AuthorizationServerMetadata", object(["issuer", "authorization_endpoint", "token_endpoint"], [
                ("issuer", string), ("authorization_endpoint", string), ("token_endpoint", string),
                ("registration_endpoint", string), ("revocation_endpoint", string),
                ("response_types_supported", strings), ("grant_types_supported", strings),
                ("code_challenge_methods_supported", strings), ("token_endpoint_auth_methods_supported", strings),
                ("scopes_supported", strings), ("client_id_metadata_document_supported", .map([("type", .string("boolean"))])),
                ("authorization_response_iss_parameter_supported", .map([("type", .string("boolean"))])),
            ])),
            ("ClientMetadata", object(["redirect_uris"], [
                ("redirect_uris", .map([("type", .string("array")), ("minItems", .int(1)), ("maxItems", .int(OAuthClient.maximumRedirectURIs)),
                                        ("items", .map([("type", .string("string")), ("maxLength", .int(RedirectURI.maximumLength)),
                                                        ("pattern", .string(RedirectURI.pattern))]))])),
                ("client_name", .map([("type", .string("string")), ("description", .string("Cleaned; at most 60 characters are kept"))])),
                ("grant_types", .map([("type", .string("array")), ("items", enumeration(OAuthClient.grantTypesSupported)),
                                      ("contains", .map([("const", .string("authorization_code"))]))])),
                ("response_types", .map([("type", .string("array")), ("minItems", .int(1)), ("maxItems", .int(1)),
                                         ("items", enumeration(["code"]))])),
                ("token_endpoint_auth_method", enumeration(["none", "client_secret_post", "client_secret_basic"])),
            ])),
            ("ClientInformation", object(["client_id", "redirect_uris", "token_endpoint_auth_method"], [
                ("client_id", string), ("client_id_issued_at", .map([("type", .string("integer"))])),
                ("client_secret", .map([("type", .string("string")), ("description", .string("Confidential clients only; shown once"))])),
                ("client_secret_expires_at", .map([("type", .string("integer"))])), ("client_name", string),
                ("redirect_uris", strings), ("grant_types", strings), ("response_types", strings),
                ("token_endpoint_auth_method", string),
            ])),
            ("TokenResponse", object(["access_token", "token_type", "expires_in"], [
                ("access_token", string), ("token_type", enumeration(["Bearer"])), ("expires_in", .map([("type", .string("integer"))])),
                ("scope", string), ("refresh_token", string),
            ])),
            ("ConsentRequest", object(["client_id", "client_name", "client_host", "scope", "consent_token"], [
                ("client_id", string), ("client_name", string), ("client_host", string), ("scope", string),
                ("email", .map([("type", .list([.string("string"), .string("null")]))])), ("consent_token", string),
            ])),
            ("Grant", object(["id", "client_id", "client_name", "client_host", "created_at"], [
                ("id", string), ("client_id", string), ("client_name", string), ("client_host", string), ("created_at", string),
                ("last_used_at", .map([("type", .list([.string("string"), .string("null")]))])),
            ])),
        ]
    }

    private static let string: YAML = .map([("type", .string("string"))])
    private static let strings: YAML = .map([("type", .string("array")), ("items", .map([("type", .string("string"))]))])

    private static func enumeration(_ values: [String]) -> YAML {
        .map([("type", .string("string")), ("enum", .list(values.map { .string($0) }))])
    }

    private static func object(_ required: [String], _ properties: [(String, YAML)]) -> YAML {
        .map([("type", .string("object")), ("required", .list(required.map { .string($0) })), ("properties", .map(properties))])
    }

    private static func json(_ description: String, _ schema: String, headers: [(String, String)] = []) -> YAML {
        var entries: [(String, YAML)] = [("description", .string(description))]
        if !headers.isEmpty {
            entries.append(("headers", .map(headers.map { name, about in
                (name, .map([("description", .string(about)), ("schema", .map([("type", .string(name == "Retry-After" ? "integer" : "string"))]))]))
            })))
        }
        entries.append(("content", .map([("application/json", .map([("schema", ref(schema))]))])))
        return .map(entries)
    }

    private static func page(_ description: String) -> YAML {
        .map([("description", .string(description)),
              ("content", .map([("text/html", .map([("schema", .map([("type", .string("string"))]))]))]))])
    }

    private static let formContent = "application/x-www-form-urlencoded"

    private static func form(_ properties: [(String, YAML)]) -> YAML {
        .map([("required", .bool(true)), ("content", .map([(formContent, .map([("schema", object([], properties))]))]))])
    }

    /// Answers of the person's routes besides their success: 401, 429 and 503.
    private static var personRefusals: [(String, YAML)] {
        [("401", json("No valid session of the person", "OAuthError")),
         ("429", text("Too many failed authentications", [RelayError.rateLimited(retryAfter: 0).text], headers: [retryAfter])),
         ("503", json("The relay cannot answer now", "OAuthError", headers: [retryAfter]))]
    }

    private static var serverMetadata: YAML {
        .map([("summary", .string("RFC 8414 authorization server metadata: the relay signs agents in")), ("security", .list([])),
              ("responses", .map([("200", json("The metadata", "AuthorizationServerMetadata"))]))])
    }

    private static var authorize: YAML {
        let names = ["response_type", "client_id", "redirect_uri", "code_challenge", "code_challenge_method", "state", "scope",
                     "resource"]
        return .map([
            ("summary", .string("Starts a sign-in: PKCE S256, the person approves on /app/oauth/consent")),
            ("security", .list([])),
            ("parameters", .list(names.map { name in
                .map([("name", .string(name)), ("in", .string("query")), ("required", .bool(false)), ("schema", string)])
            })),
            ("responses", .map([
                ("302", .map([("description", .string("To the consent page, or back to the client's verified redirect URI with error, state and iss")),
                              ("headers", .map([("Location", .map([("schema", string)]))]))])),
                ("400", page("The client or its redirect URI cannot be verified: a page, never a redirect")),
                ("503", page("The relay cannot answer now")),
            ])),
        ])
    }

    private static var tokenEndpoint: YAML {
        .map([
            ("summary", .string("The authorization_code and refresh_token grants (refresh tokens rotate; a reused one ends its family)")),
            ("security", .list([])),
            ("requestBody", form([
                ("grant_type", enumeration(["authorization_code", "refresh_token"])), ("code", string), ("redirect_uri", string),
                ("code_verifier", string), ("refresh_token", string), ("resource", string), ("client_id", string),
                ("client_secret", string), ("scope", string),
            ])),
            ("responses", .map([
                ("200", json("The tokens (never cached)", "TokenResponse")),
                ("400", json("invalid_request, invalid_grant, invalid_target, unsupported_grant_type", "OAuthError")),
                ("401", json("invalid_client", "OAuthError", headers: [("WWW-Authenticate", "Basic")])),
                ("411", lengthRequired),
                ("503", json("The relay cannot answer now", "OAuthError", headers: [retryAfter])),
            ])),
        ])
    }

    /// A chunked request body: the relay's HTTP server needs Content-Length on every body.
    private static var lengthRequired: YAML { text("A chunked body: bodies need Content-Length", ["Length Required"]) }

    private static var register: YAML {
        .map([
            ("summary", .string("Dynamic client registration (RFC 7591): public or confidential clients")),
            ("security", .list([])),
            ("requestBody", .map([("required", .bool(true)),
                                  ("content", .map([("application/json", .map([("schema", ref("ClientMetadata"))]))]))])),
            ("responses", .map([
                ("201", json("Registered", "ClientInformation")),
                ("400", json("invalid_redirect_uri or invalid_client_metadata", "OAuthError")),
                ("429", json("20 registrations from this address in the last hour", "OAuthError", headers: [retryAfter])),
                ("503", json("Too many clients, or the relay cannot answer now", "OAuthError", headers: [retryAfter])),
            ])),
        ])
    }

    private static var revoke: YAML {
        .map([
            ("summary", .string("RFC 7009: a refresh or access token ends every token of its sign-in")),
            ("security", .list([])),
            ("requestBody", form([("token", string), ("token_type_hint", string), ("client_id", string), ("client_secret", string)])),
            ("responses", .map([
                ("200", .map([("description", .string("Revoked, or nothing to revoke")),
                              ("content", .map([("application/json", .map([("schema", object([], []))]))]))])),
                ("400", json("invalid_request", "OAuthError")),
                ("401", json("invalid_client", "OAuthError", headers: [("WWW-Authenticate", "Basic")])),
                ("411", lengthRequired),
                ("503", json("The relay cannot answer now", "OAuthError", headers: [retryAfter])),
            ])),
        ])
    }

    private static let requestParameter: YAML = .map([("name", .string("request")), ("in", .string("path")),
                                                      ("required", .bool(true)), ("schema", string)])

    private static var consentDetails: YAML {
        .map([
            ("summary", .string("What the consent page shows, with the person's session: the client, its host, the email")),
            ("parameters", .list([requestParameter])),
            ("responses", .map([("200", json("The request and its one-time consent token", "ConsentRequest")),
                                ("404", json("Expired, unknown or decided", "OAuthError"))] + personRefusals)),
        ])
    }

    private static var consentDecision: YAML {
        .map([
            ("summary", .string("The person's Approve or Deny, once; the browser then goes to redirect_url")),
            ("parameters", .list([requestParameter])),
            ("requestBody", .map([("required", .bool(true)), ("content", .map([("application/json", .map([("schema", object(
                ["action", "consent_token"], [("action", enumeration(["approve", "deny"])), ("consent_token", string)]))]))]))])),
            ("responses", .map([("200", .map([("description", .string("Where the browser goes")),
                                              ("content", .map([("application/json", .map([("schema", object(
                                                  ["redirect_url"], [("redirect_url", string)]))]))]))])),
                                ("400", json("Not a decision", "OAuthError")),
                                ("403", json("The consent token is not this request's and person's", "OAuthError")),
                                ("404", json("Expired, unknown or decided", "OAuthError"))] + personRefusals)),
        ])
    }

    private static var grants: YAML {
        .map([
            ("summary", .string("Connected agents: the person's grants")),
            ("responses", .map([("200", .map([("description", .string("The grants")),
                                              ("content", .map([("application/json", .map([("schema", .map([
                                                  ("type", .string("array")), ("items", ref("Grant"))]))]))]))]))] + personRefusals)),
        ])
    }

    private static var disconnect: YAML {
        .map([
            ("summary", .string("Disconnects an agent: its tokens fail on every instance within 5 s, its waiting requests end")),
            ("parameters", .list([.map([("name", .string("grant")), ("in", .string("path")), ("required", .bool(true)),
                                        ("schema", string)])])),
            ("responses", .map([("204", .map([("description", .string("Disconnected"))])),
                                ("404", text("No such grant of this person", ["Not Found"]))] + personRefusals)),
        ])
    }
}
