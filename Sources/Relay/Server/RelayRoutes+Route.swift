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
            } else if path.hasPrefix(Route.locateRequest.rawValue), path.utf8.count > Route.locateRequest.rawValue.utf8.count,
                      !path.dropFirst(Route.locateRequest.rawValue.count).contains("/") {
                self = .locateRequest
            } else if let route = Route(rawValue: path), route != .locateRequest {
                self = route
            } else {
                return nil
            }
        }

        /// The methods it allows, as `Allow` lists them.
        var methods: [String] {
            switch self {
            case .locate, .mcp, .deviceAnswer: ["POST"]
            case .locateRequest: ["GET", "HEAD", "DELETE"]
            case .device, .resourceMetadata, .resourceMetadataMCP, .healthz, .readyz, .metrics, .openapi, .app: ["GET", "HEAD"]
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
