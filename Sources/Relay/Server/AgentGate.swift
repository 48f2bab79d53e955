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
            return .success(try await authenticator.agent(request.headers["Authorization"]))
        } catch .unavailable {
            return .failure(Refusal(response: .text(503, "The relay cannot check credentials right now. Retry in a few seconds.",
                                                    headers: ["Retry-After": "5"])))
        } catch {
            return .failure(Refusal(response: unauthorized))
        }
    }
}
