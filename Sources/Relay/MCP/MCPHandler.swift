import Foundation
import HTTPServer

/// POST /mcp: the Model Context Protocol over Streamable HTTP, stateless, JSON responses
/// (an event stream with progress for tool calls that ask for it), no session id (SPEC §3). The bearer check runs before any JSON-RPC.
struct MCPHandler: Sendable {
    /// Protocol versions this server speaks; the newest is offered when the client's is unknown.
    static let protocolVersions = ["2025-11-25", "2025-06-18", "2025-03-26"]

    let gate: AgentGate
    let locator: LocateService
    let database: RelayDatabase
    let allowedOrigins: Set<String>
    let logger: Logger
    /// How often a streamed tool call reports progress.
    var progressInterval: Duration = MCPProgress.defaultInterval

    static let toolDescription = """
        Ask the user's phone where it is. The user must approve on their phone (unless they \
        always allow this agent), so this can take a while: many MCP clients stop waiting after \
        60 seconds, so a shorter timeout_secs (for example 45) is wise. Pass `person` (a name or \
        email) to locate someone who shares their location with the user.
        """

    func handle(_ request: HTTPRequest) async -> HTTPResponse {
        if let origin = request.headers["Origin"], !allowedOrigins.contains(origin) {
            return .text(403, "Origin not allowed.")
        }
        // GET (no server-initiated stream) and DELETE (no sessions) are 405 (SPEC §3); the
        // route table answers them before this handler, with the same Allow.
        guard RelayRoutes.Route.mcp.allows(request.method) else { return RelayRoutes.Route.mcp.methodNotAllowed }
        let agent: AgentIdentity
        switch await gate.agent(request) {
        case .success(let identity): agent = identity
        case .failure(let refusal): return refusal.response
        }
        let id: Any, method: String, params: [String: Any]
        switch JSONRPCMessage.decode(request.body) {
        case .invalid(let code, let message):
            return rpc(status: 400, ["jsonrpc": "2.0", "id": NSNull(), "error": ["code": code, "message": message]])
        case .notification:
            return HTTPResponse(status: 202)  // notifications/initialized, ...
        case .request(let requestID, let name, let arguments):
            (id, method, params) = (requestID, name, arguments)
        }
        // A tool call from a client that asked for progress and accepts an event stream:
        // answer over SSE, with a progress notification now and then, so that the client's
        // own timeout (often 60 s) restarts while the person has not tapped yet.
        if method == "tools/call", let token = MCPProgressRequest.token(params), MCPProgressRequest.acceptsEventStream(request.headers["Accept"]) {
            let call = MCPProgress.Call(id: id, method: method, params: params, token: token)
            return .streaming(headers: ["Content-Type": "text/event-stream", "Cache-Control": "no-cache"]) { body in
                await MCPProgress.stream(call, every: progressInterval, to: body) { call in
                    await self.response(id: call.id, method: call.method, params: call.params, agent: agent)
                }
            }
        }
        return rpc(status: 200, await response(id: id, method: method, params: params, agent: agent))
    }

    /// The JSON-RPC response object for one request.
    private func response(id: Any, method: String, params: [String: Any], agent: AgentIdentity) async -> [String: Any] {
        do {
            let result = try await call(method, params: params, agent: agent)
            return ["jsonrpc": "2.0", "id": id, "result": result]
        } catch let error as RPCError {
            return ["jsonrpc": "2.0", "id": id, "error": ["code": error.code, "message": error.message]]
        } catch {
            return ["jsonrpc": "2.0", "id": id, "error": ["code": -32603, "message": "Internal error"]]
        }
    }

    struct RPCError: Error {
        let code: Int
        let message: String
    }

    private func call(_ method: String, params: [String: Any], agent: AgentIdentity) async throws -> Any {
        switch method {
        case "initialize":
            let asked = params["protocolVersion"] as? String ?? ""
            return ["protocolVersion": Self.protocolVersions.contains(asked) ? asked : Self.protocolVersions[0],
                    "capabilities": ["tools": ["listChanged": false]],
                    "serverInfo": ["name": "whereabot", "version": Relay.version],
                    "instructions": "Use get_phone_location to ask the user's phone where it is; the user approves on the phone."]
        case "ping":
            return [String: Any]()
        case "tools/list":
            return ["tools": Self.tools]
        case "tools/call":
            return try await callTool(params, agent: agent)
        default:
            // Includes server/discover (2026-07-28): an unknown method makes clients fall back
            // to initialize.
            throw RPCError(code: -32601, message: "Method not found: \(method.prefix(64))")
        }
    }

    static var tools: [[String: Any]] { [
        ["name": "get_phone_location", "title": "Get phone location", "description": toolDescription,
         "inputSchema": ["type": "object", "additionalProperties": false, "properties": [
            "timeout_secs": ["type": "integer", "minimum": 1, "maximum": 120, "default": 60,
                             "description": "Seconds to wait for the phone (1 to 120)."],
            "person": ["type": "string", "description": "Name or email of someone who shares their location with the user."],
         ]]],
        ["name": "list_people_sharing_with_me", "title": "List people sharing with me",
         "description": "The people (name and email) who share their location with the user.",
         "inputSchema": ["type": "object", "additionalProperties": false, "properties": [String: Any]()]],
    ] }

    private func callTool(_ params: [String: Any], agent: AgentIdentity) async throws -> Any {
        let arguments = params["arguments"] as? [String: Any] ?? [:]
        switch params["name"] as? String {
        case "get_phone_location":
            var timeout = 60
            if let value = arguments["timeout_secs"] {
                // Range-checked as a Double first: Int(NSNumber) of 1e300 would not fit.
                guard let number = value as? NSNumber, String(cString: number.objCType) != "c",
                      number.doubleValue.isFinite, number.doubleValue == number.doubleValue.rounded(),
                      (1...120).contains(number.doubleValue) else {
                    // SEP-1303: input validation errors are tool results the model can read.
                    return toolError("timeout_secs must be a whole number from 1 to 120.")
                }
                timeout = Int(number.doubleValue)
            }
            if let person = arguments["person"], !(person is String) {
                return toolError("person must be a string (a name or an email).")
            }
            if let unknown = arguments.keys.first(where: { $0 != "timeout_secs" && $0 != "person" }) {
                return toolError("Unknown argument \(unknown.prefix(64)); get_phone_location takes timeout_secs and person.")
            }
            let result: LocateService.Result
            do {
                result = try await locator.locate(agent: agent, person: arguments["person"] as? String, timeoutSeconds: timeout)
            } catch {
                logger.failure("locate_failed", error)
                return toolError(RelayRoutes.databaseUnreachableText)
            }
            switch result {
            case .fix(let json, let structured):
                return ["content": [["type": "text", "text": json]],
                        "structuredContent": (try? JSONSerialization.jsonObject(with: Data(structured.utf8))) ?? [:],
                        "isError": false]
            case .failure(let failure):
                return toolError(failure.agentText)
            case .abandoned:
                return toolError("The request was abandoned.")
            }
        case "list_people_sharing_with_me":
            let people: [Person]
            do {
                people = try await database.peopleSharing(with: agent.userID)
            } catch {
                logger.failure("people_sharing_failed", error)
                return toolError(RelayRoutes.databaseUnreachableText)
            }
            let list = people.map { ["name": $0.name, "email": $0.email] }
            let text = people.isEmpty ? "Nobody shares their location with you yet."
                : people.map { "\($0.name) (\($0.email))" }.joined(separator: "\n")
            return ["content": [["type": "text", "text": text]], "structuredContent": ["people": list], "isError": false]
        default:
            throw RPCError(code: -32602, message: "Unknown tool.")
        }
    }

    private func toolError(_ text: String) -> [String: Any] {
        ["content": [["type": "text", "text": text]], "isError": true]
    }

    private func rpc(status: Int, _ object: [String: Any]) -> HTTPResponse {
        HTTPResponse(status: status, headers: ["Content-Type": "application/json"], body: Self.json(object))
    }

    /// Compact JSON, keys sorted.
    static func json(_ object: Any) -> [UInt8] {
        Array((try? JSONSerialization.data(withJSONObject: object, options: [.sortedKeys, .withoutEscapingSlashes])) ?? Data())
    }
}
