import Foundation
import HTTPServer
import JSON

/// The HTTP routes of SPEC §3 and §5: agents (POST /v1/locate, /mcp), phones (GET
/// /v1/device, POST /v1/device/answer), metadata and operations (/healthz, /readyz,
/// /metrics). While the instance drains, new agent requests and phone sockets get 503
/// with Retry-After (a load balancer sends them elsewhere once /readyz says 503).
struct RelayRoutes: Sendable {
    let authenticator: Authenticator
    let locator: LocateService
    let hub: DeviceHub
    let publicURL: String
    let mcp: MCPHandler
    let authorizationServers: [String]
    let settler: AnswerSettler
    let health: RelayHealth
    let gate: AgentGate
    let logger: Logger
    /// Browser origins allowed to open phone sockets (PUBLIC_URL's and ALLOWED_ORIGINS).
    let allowedOrigins: Set<String>
    /// The browser phone's files.
    let app: AppRoutes
    /// Async locates and their polls.
    let durable: DurableRoutes

    /// Default and maximum `timeout_secs` of a locate.
    static let defaultTimeout = 60
    static let maximumTimeout = 120

    /// The texts of the routes besides the agent texts of `AgentFailure`; docs/openapi.yaml
    /// is built from these (`OpenAPIDocument`), so each exists once.
    static let timeoutText = "timeout_secs must be a whole number of seconds from 1 to \(maximumTimeout)."
    static let asyncTimeoutText = "timeout_secs must be a whole number of seconds from 1 to \(DurableRoutes.maximumTimeout)."
    static let answerNotJSONText = "The body must be a JSON message."
    static let answerNotAnswerText = "Only answers (location, denied, unavailable) can be posted here."
    static let answerUnknownText = "Not a known message."
    static let answerGoneText = "No request waits under this id."
    static let answerForbiddenText = "That request belongs to another user."
    static let agentCannotAnswerText = "Agent credentials cannot answer."
    static let agentCannotConnectText = "Agent credentials cannot connect as a phone."
    static let deviceRemovedText = "This session was signed out by removing its device. Sign in again."

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

    func handle(_ request: HTTPRequest) async -> HTTPResponse {
        let path = String(request.path)
        guard let route = Route(path: path) else { return .text(404, "Not Found") }
        guard route.allows(request.method) else { return route.methodNotAllowed }
        if health.isDraining, route.drains, route != .device { return RelayError.draining.response }  // phones: see device(_:)
        switch route {
        case .app:
            return app.response(method: request.method, path: path)
        case .healthz:
            return .text(200, "ok")
        case .openapi:
            return HTTPResponse(status: 200, headers: ["Content-Type": "application/yaml"], body: Array(OpenAPIDocument.yaml.utf8))
        case .locate:
            return await locate(request)
        case .locateRequest:
            switch await gate.agent(request) {
            case .success(let agent): return await gate.delivering(await durable.handle(request, agent: agent), to: request)
            case .failure(let refusal): return refusal.response
            }
        case .device:
            return await device(request)
        case .deviceAnswer:
            return await deviceAnswer(request)
        case .readyz:
            let readiness = health.readiness()
            return readiness.missing.isEmpty ? .text(200, readiness.body) : RelayError.notReady(readiness.body).response
        case .metrics:
            return HTTPResponse(status: 200, headers: ["Content-Type": "text/plain; version=0.0.4"],
                                body: Array(await health.metrics().utf8))
        case .mcp:
            return await mcp.handle(request)
        case .resourceMetadata, .resourceMetadataMCP:
            return resourceMetadata
        }
    }

    /// RFC 9728 protected resource metadata.
    private var resourceMetadata: HTTPResponse {
        let object: JSONValue = ["resource": .string(publicURL + "/mcp"),
                                 "authorization_servers": .array(authorizationServers.map(JSONValue.string)),
                                 "bearer_methods_supported": ["header"],
                                 "scopes_supported": .array(AgentGate.scope.split(separator: " ").map { .string(String($0)) })]
        return HTTPResponse(status: 200, headers: ["Content-Type": "application/json"], body: object.bytes)
    }

    private func locate(_ request: HTTPRequest) async -> HTTPResponse {
        let agent: AgentIdentity
        switch await gate.agent(request) {
        case .success(let identity): agent = identity
        case .failure(let refusal): return refusal.response
        }
        // Prefer: respond-async (SPEC §11): a durable request, 202 at once, a longer window.
        let async = DurableParams.prefersAsync(request.headers["Prefer"])
        var timeout = async ? DurableRoutes.defaultTimeout : Self.defaultTimeout
        if let text = request.queryItem("timeout_secs") {
            let maximum = async ? DurableRoutes.maximumTimeout : Self.maximumTimeout
            guard let value = Self.timeoutSeconds(text, maximum: maximum) else {
                return RelayError.badInput(async ? Self.asyncTimeoutText : Self.timeoutText).response
            }
            timeout = value
        }
        let reason: String?
        switch Self.reasonArgument(request) {
        case .success(let text): reason = text
        case .failure(let refusal): return RelayError.badInput(refusal.text).response
        }
        if async {
            return await durable.open(agent: agent, person: request.queryItem("person"), reason: reason, timeoutSeconds: timeout)
        }
        let result: LocateService.Result
        do {
            result = try await locator.locate(agent: agent, person: request.queryItem("person"), reason: reason, timeoutSeconds: timeout)
        } catch {
            logger.failure("locate_failed", error)
            return RelayError.databaseUnreachable.response
        }
        // Abandoned: the agent hung up, or its key was revoked while it waited (then 401).
        if case .abandoned = result { return await gate.delivering(.text(499, "abandoned"), to: request) }
        return await gate.delivering(DurableRoutes.response(result), to: request)
    }

    /// Why a locate's reason was refused (400).
    struct ReasonRefusal: Error {
        let text: String
        static let tooLong = ReasonRefusal(text: LocateReason.tooLongText)
        static let body = ReasonRefusal(text: "The body of POST /v1/locate is empty or a JSON object such as {\"reason\": \"…\"}.")
    }

    /// A locate's `reason`, cleaned (`LocateReason`): the query's, else the JSON body's
    /// (`{"reason": "…"}`); nil for none.
    static func reasonArgument(_ request: HTTPRequest) -> Result<String?, ReasonRefusal> {
        var raw = request.queryItem("reason")
        if raw == nil, !request.body.allSatisfy({ $0 == 0x20 || $0 == 0x0A || $0 == 0x0D || $0 == 0x09 }) {
            guard case .object(let object)? = JSONValue.parse(bytes: request.body),
                  object.keys.allSatisfy({ $0 == "reason" }) else { return .failure(.body) }
            switch object["reason"] {
            case nil, .null?: break
            case .string(let text)?: raw = text
            default: return .failure(.body)
            }
        }
        switch LocateReason.check(raw) {
        case .reason(let text): return .success(text)
        case .tooLong: return .failure(.tooLong)
        }
    }

    /// A locate's `timeout_secs`: a whole number of seconds above 0, values above the maximum
    /// (however many digits, even past Int) waiting the maximum; nil (400) for 0 or junk.
    static func timeoutSeconds(_ text: String, maximum: Int = maximumTimeout) -> Int? {
        if let value = Int(text) { return value > 0 ? min(value, maximum) : nil }
        let digits = text.hasPrefix("+") ? text.dropFirst() : Substring(text)
        guard !digits.isEmpty, digits.utf8.allSatisfy({ (UInt8(ascii: "0")...UInt8(ascii: "9")).contains($0) }) else { return nil }
        return maximum  // digits Int cannot hold: far above the maximum
    }

    /// One answer without a socket (from a notification action): SPEC §5's statuses.
    private func deviceAnswer(_ request: HTTPRequest) async -> HTTPResponse {
        let phone: PhoneIdentity
        switch await phoneIdentity(request, agentText: Self.agentCannotAnswerText) {
        case .success(let identity): phone = identity
        case .failure(let refusal): return refusal.response
        }
        guard let message = PhoneMessage.parse(String(decoding: request.body, as: UTF8.self)) else {
            return RelayError.badInput(Self.answerNotJSONText, status: 415).response
        }
        switch message {
        case .hello, .log, .token, .account:
            return RelayError.badInput(Self.answerNotAnswerText).response
        case .unknown:
            return RelayError.badInput(Self.answerUnknownText, status: 422).response
        case .answer(let id, let reply):
            do {
                switch try await settler.settle(id: id, user: phone.userID, device: nil, deviceName: "", platform: "", reply: reply) {
                case .settled:
                    await hub.cancel(request: id)  // the database does not notify the settling instance
                    return HTTPResponse(status: 204)
                case .gone: return RelayError.gone(Self.answerGoneText).response
                case .forbidden: return RelayError.forbidden(Self.answerForbiddenText).response
                }
            } catch {
                logger.failure("device_answer_failed", error, ["request": id.uuidString])
                return RelayError.databaseUnreachable.response
            }
        }
    }

    private func device(_ request: HTTPRequest) async -> HTTPResponse {
        // A browser's page may open the socket only from the relay's own origin (or an
        // allowed one): another site cannot use a signed-in page's token.
        if let origin = request.headers["Origin"], !allowedOrigins.contains(origin) {
            return RelayError.forbidden("Origin not allowed.").response
        }
        let credential = DeviceCredential.from(authorization: request.headers["Authorization"],
                                               protocols: request.headers["Sec-WebSocket-Protocol"])
        guard case .authorization(let authorization, let selectProtocol) = credential else {
            return RelayError.badInput("Offer one whereabot.bearer.<token> subprotocol together with whereabot.v1.").response
        }
        let response = await admitPhone(request, authorization: authorization, selectProtocol: selectProtocol)
        // "Come back in N s" reaches a phone that speaks whereabot.v1 on the socket (1013).
        if selectProtocol, request.isWebSocketUpgrade, let refusal = RetryLaterSocket.replacing(response) { return refusal }
        return response
    }

    /// A phone socket's upgrade, or why not: draining (503); its token (401, 403, 429 for an
    /// address over its failure budget, 503 when it cannot be checked); its account's or the
    /// relay's sockets waiting for a hello (429) — a place among them is taken, in order,
    /// once the token verified locally and before the session check, the database call that
    /// a reconnect storm multiplies — or its session (401, 403, 503).
    private func admitPhone(_ request: HTTPRequest, authorization: String?, selectProtocol: Bool) async -> HTTPResponse {
        if health.isDraining { return RelayError.draining.response }
        let phone: PhoneIdentity
        switch await phoneIdentity(request, authorization: authorization, agentText: Self.agentCannotConnectText,
                                   checkingSession: false) {
        case .success(let identity): phone = identity
        case .failure(let refusal): return refusal.response
        }
        guard request.isWebSocketUpgrade else { return .text(426, "Upgrade to a WebSocket.", headers: ["Upgrade": "websocket"]) }
        guard let ticket = await hub.waitingRoom.admit(account: phone.userID, address: request.remoteAddress) else {
            return RelayError.tooManyWaitingForHello.response
        }
        do {
            try await authenticator.phoneSession(phone, client: request.remoteAddress)
        } catch {
            return await phoneRefusal(error, request, agentText: Self.agentCannotConnectText).response
        }
        let headers: HTTPHeaders = selectProtocol ? ["Sec-WebSocket-Protocol": DeviceCredential.protocolName] : [:]
        return .webSocket(headers: headers, delegate: hub.session(for: phone, waiting: ticket))
    }

    /// The phone behind a phone route's bearer, or its refusal: 403 for an agent's
    /// credential and for a session revoked by removing its device, else as `AgentGate`.
    private func phoneIdentity(_ request: HTTPRequest, authorization: String?? = nil, agentText: String,
                               checkingSession: Bool = true) async -> Result<PhoneIdentity, AgentGate.Refusal> {
        do {
            return .success(try await authenticator.phone(authorization ?? request.headers["Authorization"],
                                                          client: request.remoteAddress, checkingSession: checkingSession))
        } catch {
            return .failure(await phoneRefusal(error, request, agentText: agentText))
        }
    }

    private func phoneRefusal(_ error: AuthError, _ request: HTTPRequest, agentText: String) async -> AgentGate.Refusal {
        switch error {
        case .wrongCredentialKind: AgentGate.Refusal(response: RelayError.forbidden(agentText).response)
        case .deviceRemoved: AgentGate.Refusal(response: RelayError.forbidden(Self.deviceRemovedText).response)
        default: AgentGate.Refusal(response: await gate.refusal(error, request))
        }
    }
}
