import HTTPServer

/// The HTTP routes (docs/operations.md, "Routes"), as a route table and its dispatch: agents (POST
/// /v1/locate, durable requests, /mcp: `AgentRoutes`), phones (GET /v1/device, POST
/// /v1/device/answer: `PhoneRoutes`), and metadata and operations (/healthz, /readyz,
/// /metrics, /openapi.yaml, /app/: `OperationsRoutes`), and the agents' authorization
/// server (/oauth/*, its metadata: `OAuthServer`). The table decides 404 and 405 for
/// every route at once; while the instance drains, new agent requests get 503 with
/// Retry-After (a load balancer sends them elsewhere once /readyz says 503), and phone
/// sockets the same from `PhoneRoutes`.
struct RelayRoutes: Sendable {
    let agents: AgentRoutes
    let phones: PhoneRoutes
    let operations: OperationsRoutes
    let oauth: OAuthServer

    func handle(_ request: HTTPRequest) async -> HTTPResponse {
        guard let route = Route(path: String(request.path)) else { return .text(404, "Not Found") }
        guard route.allows(request.method) else { return route.methodNotAllowed }
        // Phones get theirs after the Origin check (PhoneRoutes.device).
        if operations.health.isDraining, route.drains, route != .device { return RelayError.draining.response }
        switch route {
        case .locate: return await agents.locate(request)
        case .locateRequest: return await agents.locateRequest(request)
        case .mcp: return await agents.mcp.handle(request)
        case .device: return await phones.device(request)
        case .deviceAnswer: return await phones.deviceAnswer(request)
        case .app, .healthz, .readyz, .metrics, .openapi, .resourceMetadata, .resourceMetadataMCP:
            return await operations.handle(route, request)
        case .authorizationServerMetadata, .openIDConfiguration: return oauth.metadata
        case .oauthAuthorize: return await oauth.authorize(request)
        case .oauthToken: return await oauth.token(request)
        case .oauthRegister: return await oauth.register(request)
        case .oauthRevoke: return await oauth.revoke(request)
        case .oauthConsent:
            let id = route.id(in: request.path)
            return request.method == "POST" ? await oauth.consentDecision(request, id: id) : await oauth.consentDetails(request, id: id)
        case .oauthGrants: return await oauth.grants(request)
        case .oauthGrant: return await oauth.disconnect(request, id: route.id(in: request.path))
        }
    }
}
