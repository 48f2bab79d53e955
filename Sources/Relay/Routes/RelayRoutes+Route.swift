import HTTPServer

extension RelayRoutes {
    /// Every path the relay serves and the one method it answers there (HEAD goes wherever
    /// GET does, the server dropping the body): the route table that decides 404 and 405 for
    /// every route at once. An unknown path is 404; a known path asked with another method
    /// (TRACE, PUT, PATCH, DELETE, OPTIONS, GET /mcp, ...) is 405 with `Allow` (RFC 9110
    /// §15.5.6), before draining, Origin or credential checks.
    enum Route: String, CaseIterable, Sendable {
        case locate = "/v1/locate"
        /// `/v1/locate/requests/{request_id}`: a durable request (`DurableRoutes`).
        case locateRequest = "/v1/locate/requests/"
        case mcp = "/mcp"
        case device = "/v1/device"
        case deviceAnswer = "/v1/device/answer"
        case resourceMetadata = "/.well-known/oauth-protected-resource"
        case resourceMetadataMCP = "/.well-known/oauth-protected-resource/mcp"
        /// The relay as the agents' authorization server (`OAuthServer`).
        case authorizationServerMetadata = "/.well-known/oauth-authorization-server"
        case openIDConfiguration = "/.well-known/openid-configuration"
        case oauthAuthorize = "/oauth/authorize"
        case oauthToken = "/oauth/token"
        case oauthRegister = "/oauth/register"
        case oauthRevoke = "/oauth/revoke"
        /// `/oauth/consent/{id}`: the consent page's request (GET) and decision (POST).
        case oauthConsent = "/oauth/consent/"
        case oauthGrants = "/oauth/grants"
        /// `/oauth/grants/{id}`: one of the person's connected agents (DELETE).
        case oauthGrant = "/oauth/grants/"
        case healthz = "/healthz"
        case readyz = "/readyz"
        case metrics = "/metrics"
        case openapi = "/openapi.yaml"
        /// The browser phone: `/app` and everything under `/app/` (`AppRoutes`).
        case app = "/app/"

        /// The route serving `path`, or nil (404).
        init?(path: String) {
            if AppRoutes.handles(path) {
                self = .app
            } else if let route = Self.withID.first(where: { path.hasPrefix($0.rawValue) }) {
                let id = path.dropFirst(route.rawValue.count)
                guard !id.isEmpty, !id.contains("/") else { return nil }
                self = route
            } else if let route = Route(rawValue: path), !Self.withID.contains(route) {
                self = route
            } else {
                return nil
            }
        }

        /// Routes whose path is their prefix and one id segment.
        static let withID: [Route] = [.locateRequest, .oauthConsent, .oauthGrant]

        /// The id segment of a path of a `withID` route.
        func id(in path: Substring) -> Substring { path.dropFirst(rawValue.count) }

        /// The methods it allows, as `Allow` lists them.
        var methods: [String] {
            switch self {
            case .locate, .mcp, .deviceAnswer, .oauthToken, .oauthRegister, .oauthRevoke: ["POST"]
            case .locateRequest: ["GET", "HEAD", "DELETE"]
            case .oauthConsent: ["GET", "HEAD", "POST"]
            case .oauthGrant: ["DELETE"]
            case .device, .resourceMetadata, .resourceMetadataMCP, .healthz, .readyz, .metrics, .openapi, .app,
                 .authorizationServerMetadata, .openIDConfiguration, .oauthAuthorize, .oauthGrants: ["GET", "HEAD"]
            }
        }

        func allows(_ method: String) -> Bool { methods.contains(method) }

        /// Routes that refuse new work while the instance drains (agents' requests, phone sockets).
        var drains: Bool { self == .locate || self == .mcp || self == .device || self == .locateRequest }

        /// 405 with the route's `Allow`.
        var methodNotAllowed: HTTPResponse {
            .text(405, "Method Not Allowed", headers: ["Allow": methods.joined(separator: ", ")])
        }
    }
}
