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

    /// 401 with the protected-resource metadata pointer (docs/protocol.md, "Credentials"); with a
    /// credential that
    /// was presented and refused, also `error="invalid_token"` (RFC 6750 §3.1: a request
    /// without one gets no error code).
    func unauthorized(presented: Bool) -> HTTPResponse {
        var challenge = "Bearer resource_metadata=\"\(publicURL)/.well-known/oauth-protected-resource\", scope=\"\(Self.scope)\""
        if presented { challenge += ", error=\"invalid_token\"" }
        return RelayError.locate(.badCredential, now: authenticator.clock.date).response(headers: ["WWW-Authenticate": challenge])
    }

    func agent(_ request: HTTPRequest) async -> Result<AgentIdentity, Refusal> {
        do {
            return .success(try await identity(request))
        } catch {
            return .failure(Refusal(response: await refusal(error, request)))
        }
    }

    /// `response`, unless the credential that asked was revoked while the request waited
    /// (its session ended — a grant revoked, a sign-out — or its agent key was revoked):
    /// then the 401 a new request would get, and nothing of the answer. Revocation is
    /// checked again before any result is delivered (a long poll, a call that waited for the
    /// person). A token that merely expired during the wait, or a credential that cannot be
    /// checked now, keeps the answer it waited for.
    func delivering(_ response: HTTPResponse, to request: HTTPRequest) async -> HTTPResponse {
        await isRevoked(request) ? unauthorized(presented: true) : response
    }

    /// Whether the credential of `request` was revoked since it was let in (its session
    /// ended, or its agent key was revoked); an expiry or a check that cannot be made now is
    /// not a revocation.
    func isRevoked(_ request: HTTPRequest) async -> Bool {
        do {
            _ = try await identity(request)
            return false
        } catch .revoked, .noSession, .unknownAgentKey {
            return true
        } catch {
            return false
        }
    }

    /// The agent behind the request's credential: on the request's task when the
    /// authenticator remembers all of it and it is fresh, else from the `Authenticator` actor.
    private func identity(_ request: HTTPRequest) async throws(AuthError) -> AgentIdentity {
        let authorization = request.headers["Authorization"]
        if let agent = authenticator.rememberedAgent(authorization) { return agent }
        return try await authenticator.agent(authorization, client: request.remoteAddress)
    }

    /// The response for a refused credential: 503 when it could not be checked, 429 for an
    /// address over its failure budget, else 401 with the metadata pointer.
    func refusal(_ error: AuthError, _ request: HTTPRequest) async -> HTTPResponse {
        switch error {
        case .unavailable:
            return RelayError.cannotCheckCredentials.response
        case .rateLimited:
            let seconds = await authenticator.retryAfter(client: request.remoteAddress)
            return RelayError.rateLimited(retryAfter: seconds).response
        case .missing:
            return unauthorized(presented: false)
        default:
            return unauthorized(presented: true)
        }
    }

    /// The scope an agent's token needs (the MCP authorization spec's scope selection):
    /// `location`, what the relay's authorization server grants. The protected-resource
    /// metadata lists the same.
    static let scope = "location"
}
