import HTTPServer

/// The bearer check in front of every agent route (/v1/locate, /mcp): an agent identity,
/// or the response that refuses the request (401 with WWW-Authenticate, or 503).
struct AgentGate: Sendable {
    let authenticator: Authenticator
    let publicURL: String

    /// Why a request was refused, as its response.
    struct Refusal: Error {
        let response: HTTPResponse
    }

    /// 401 with the protected-resource metadata pointer (SPEC §3).
    var unauthorized: HTTPResponse {
        .text(401, AgentFailure.badCredential.agentText,
              headers: ["WWW-Authenticate": "Bearer resource_metadata=\"\(publicURL)/.well-known/oauth-protected-resource\""])
    }

    func agent(_ request: HTTPRequest) async -> Result<AgentIdentity, Refusal> {
        do {
            return .success(try await authenticator.agent(request.headers["Authorization"], client: request.remoteAddress))
        } catch {
            return .failure(Refusal(response: await refusal(error, request)))
        }
    }

    /// The response for a refused credential: 503 when it could not be checked, 429 for an
    /// address over its failure budget, else 401 with the metadata pointer.
    func refusal(_ error: AuthError, _ request: HTTPRequest) async -> HTTPResponse {
        switch error {
        case .unavailable:
            return .text(503, Self.cannotCheckText, headers: ["Retry-After": "5"])
        case .rateLimited:
            let seconds = await authenticator.retryAfter(client: request.remoteAddress)
            return .text(429, Self.rateLimitedText, headers: ["Retry-After": String(seconds)])
        default:
            return unauthorized
        }
    }

    /// The 503 text when the database cannot be asked about a credential.
    static let cannotCheckText = "The relay cannot check credentials right now. Retry in a few seconds."
    /// The 429 text for a client address with too many failed authentications.
    static let rateLimitedText = "Too many failed authentications from this address. Retry later."
}
