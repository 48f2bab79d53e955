import HTTPServer
import JSON

/// What operators and clients read about the instance: `/healthz`, `/readyz` (503 with
/// Retry-After while something it needs is missing), `/metrics`, `/openapi.yaml`, the
/// RFC 9728 protected-resource metadata, and the browser phone's files under `/app/`.
struct OperationsRoutes: Sendable {
    let health: RelayHealth
    let publicURL: String
    let authorizationServers: [String]
    /// The browser phone's files.
    let app: AppRoutes

    /// The response of one of the operations' routes.
    func handle(_ route: RelayRoutes.Route, _ request: HTTPRequest) async -> HTTPResponse {
        switch route {
        case .app:
            return app.response(method: request.method, path: String(request.path))
        case .healthz:
            return .text(200, "ok")
        case .openapi:
            return HTTPResponse(status: 200, headers: ["Content-Type": "application/yaml"], body: Array(OpenAPIDocument.yaml.utf8))
        case .readyz:
            let readiness = health.readiness()
            return readiness.missing.isEmpty ? .text(200, readiness.body) : RelayError.notReady(readiness.body).response
        case .metrics:
            return HTTPResponse(status: 200, headers: ["Content-Type": "text/plain; version=0.0.4"],
                                body: Array(await health.metrics().utf8))
        case .resourceMetadata, .resourceMetadataMCP:
            return resourceMetadata
        case .locate, .locateRequest, .mcp, .device, .deviceAnswer, .authorizationServerMetadata, .openIDConfiguration,
             .oauthAuthorize, .oauthToken, .oauthRegister, .oauthRevoke, .oauthConsent, .oauthGrants, .oauthGrant:
            preconditionFailure("not an operations route: \(route)")
        }
    }

    /// RFC 9728 protected resource metadata.
    var resourceMetadata: HTTPResponse {
        let object: JSONValue = ["resource": .string(publicURL + "/mcp"),
                                 "authorization_servers": .array(authorizationServers.map(JSONValue.string)),
                                 "bearer_methods_supported": ["header"],
                                 "scopes_supported": .array(AgentGate.scope.split(separator: " ").map { .string(String($0)) })]
        return HTTPResponse(status: 200, headers: ["Content-Type": "application/json"], body: object.bytes)
    }
}
