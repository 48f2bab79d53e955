import Foundation
import HTTPServer
import JSON
import RelayCore

/// POST /mcp: the Model Context Protocol over Streamable HTTP, stateless, JSON responses
/// (an event stream with progress for tool calls that ask for it), no session id
/// (docs/protocol.md, "MCP"). The bearer check runs before any JSON-RPC.
struct MCPHandler: Sendable {

    let gate: AgentGate
    let locator: LocateService
    let database: RelayDatabase
    let allowedOrigins: Set<String>
    let logger: Logger
    /// How often a streamed tool call reports progress.
    var progressInterval: Duration = MCPProgress.defaultInterval
    /// How long one call waits for the person before it answers "still waiting"
    /// (`MCP_WAIT_SECONDS`, docs/protocol.md, "Durable requests").
    var waitBound: Duration = MCPHandler.defaultWaitBound
    /// Polls per request and credential.
    var polls = PollLimiter()
    /// The tool calls running here, for `notifications/cancelled`.
    let inFlight = InFlightCalls()
    /// Whether tasks/list can name tasks (a REQUEST_ID_KEY is configured).
    var tasksListed: Bool { locator.requestIDKey != nil }

    /// `MCP_WAIT_SECONDS`'s default (5 to 110 are accepted).
    static let defaultWaitBound: Duration = .seconds(45)


    /// Methods whose answer may carry a location (checked against revocation again).
    static let deliversResults: Set<String> = ["tools/call", "tasks/get", "tasks/result"]

    func handle(_ request: HTTPRequest) async -> HTTPResponse {
        if let origin = request.headers["Origin"], !allowedOrigins.contains(origin) {
            return RelayError.forbidden("Origin not allowed.").response
        }
        // GET (no server-initiated stream) and DELETE (no sessions) are 405 (docs/protocol.md, "MCP"); the
        // route table answers them before this handler, with the same Allow.
        guard RelayRoutes.Route.mcp.allows(request.method) else { return RelayRoutes.Route.mcp.methodNotAllowed }
        let agent: AgentIdentity
        switch await gate.agent(request) {
        case .success(let identity): agent = identity
        case .failure(let refusal): return refusal.response
        }
        let id: JSONValue, method: String, params: [String: JSONValue]
        switch JSONRPCMessage.decode(request.body) {
        case .invalid(let code, let message):
            return rpc(status: 400, ["jsonrpc": "2.0", "id": .null, "error": ["code": JSONValue(code), "message": .string(message)]])
        case .notification(let method, let params):
            // notifications/cancelled is an explicit cancel: the call it names is withdrawn
            // (its phones get cancel). A closed stream is not one, and neither is the
            // courtesy cancel a client sends when its own timeout ran out (the official SDK's
            // reason: "timed out after 5.0s"): both are hang-ups, and the person keeps the
            // prompt for the agent's next ask.
            if method == "notifications/cancelled", let requestID = params["requestId"] {
                if Self.isTimeout(params["reason"]?.string) {
                    // The client stopped waiting: an answer handed to that call as its timeout
                    // ran out never reached it, and its next ask gets it.
                    if let token = inFlight.recentToken(of: requestID, for: agent, now: locator.clock.date) {
                        locator.joins.hungUp(token)
                    }
                } else if let token = inFlight.token(of: requestID, for: agent) {
                    do {
                        try await locator.withdraw(token, agent: agent)
                    } catch {
                        logger.failure("withdraw_failed", error, ["request": token.tag])
                    }
                }
            }
            return HTTPResponse(status: 202)  // notifications/initialized, ...
        case .request(let requestID, let name, let arguments):
            (id, method, params) = (requestID, name, arguments)
        }
        let chosen: MCPRevision.Chosen
        switch MCPRevision.choose(method: method, params: params, id: id, versionHeader: request.headers["MCP-Protocol-Version"],
                                  methodHeader: request.headers["Mcp-Method"], nameHeader: request.headers["Mcp-Name"]) {
        case .success(let value): chosen = value
        case .failure(let refusal): return rpc(status: refusal.status, Self.error(id: id, refusal))
        }
        let revision = chosen.revision
        if case .modern = revision, method == "tools/call", !Self.toolNames.contains(params["name"]?.string ?? "") {
            return rpc(status: 400, Self.error(id: id, Self.unknownTool(params)))
        }
        return await Logger.$traceparent.withValue(chosen.traceparent) {
            // A tool call from a client that asked for progress and accepts an event stream:
            // answer over SSE, with a progress notification now and then, so that the client's
            // own timeout (often 60 s) restarts while the person has not tapped yet. Closing
            // the stream is a hang-up, not a cancel: the request stays open for the person,
            // and the agent's next ask joins it (notifications/cancelled withdraws it).
            if method == "tools/call", let token = MCPProgressRequest.token(params),
               MCPProgressRequest.acceptsEventStream(request.headers["Accept"]) {
                let call = MCPProgress.Call(id: id, method: method, params: params, token: token)
                let traceparent = chosen.traceparent
                return .streaming(headers: ["Content-Type": "text/event-stream", "Cache-Control": "no-cache",
                                            "X-Accel-Buffering": "no"]) { body in
                    await Logger.$traceparent.withValue(traceparent) {
                        await MCPProgress.stream(call, every: progressInterval, to: body) { call in
                            let answer = await self.response(id: call.id, method: call.method, params: call.params, agent: agent,
                                                             revision: revision).body
                            // Checked again before the result goes out, as a plain reply is.
                            return await self.gate.isRevoked(request) ? Self.error(id: call.id, Self.revokedCredential) : answer
                        }
                    }
                }
            }
            let (status, body, retryAfter) = await response(id: id, method: method, params: params, agent: agent, revision: revision)
            logger.debug("mcp_request", ["method": String(method.prefix(64)), "status": String(status)])
            var reply = rpc(status: status, body)
            if let retryAfter { reply.headers.set("Retry-After", String(retryAfter)) }
            // What may carry a location waited for the person: the credential is checked again.
            return Self.deliversResults.contains(method) ? await gate.delivering(reply, to: request) : reply
        }
    }

    /// Whether a cancel's reason says the client's own timeout ran out (a hang-up, not a
    /// refusal).
    static func isTimeout(_ reason: String?) -> Bool {
        guard let reason = reason?.prefix(200).lowercased() else { return false }
        return reason.contains("timed out") || reason.contains("timeout")
    }

    /// The revision whose wire form of tasks is SEP-1686's.
    static let tasksVersion = "2025-11-25"

    /// The tools' names.
    static let toolNames: Set<String> = ["get_phone_location", "list_people_sharing_with_me"]

    /// The JSON-RPC error object of a refusal, echoing the request's id.
    static func error(id: JSONValue, _ refusal: MCPRevision.Refusal) -> JSONValue {
        var error: [String: JSONValue] = ["code": JSONValue(refusal.code), "message": .string(refusal.message)]
        if let data = refusal.data { error["data"] = data }
        return ["jsonrpc": "2.0", "id": id, "error": .object(error)]
    }

    /// The error a streamed call's credential gets when it was revoked while the call
    /// waited (a plain reply gets the 401 instead; a stream's status has already gone out).
    static let revokedCredential = MCPRevision.Refusal(401, -32001, AgentFailure.badCredential.agentText)

    /// -32602 for a tool this server does not have, naming it.
    static func unknownTool(_ params: [String: JSONValue]) -> MCPRevision.Refusal {
        let name = params["name"]?.string.map { String($0.prefix(64)) } ?? "(no name)"
        return MCPRevision.Refusal(400, -32602, "Unknown tool: \(name) (the tools are get_phone_location and list_people_sharing_with_me).")
    }

    /// The HTTP status and JSON-RPC response object for one request in `revision`.
    private func response(id: JSONValue, method: String, params: [String: JSONValue], agent: AgentIdentity,
                          revision: MCPRevision) async -> (status: Int, body: JSONValue, retryAfter: Int?) {
        do {
            var result: [String: JSONValue]
            switch revision {
            case .legacy(let version): result = try await legacyCall(method, params: params, agent: agent, version: version, id: id)
            case .modern: result = try await modernCall(method, params: params, agent: agent, id: id)
            }
            if case .modern = revision {
                if result["resultType"] == nil { result["resultType"] = "complete" }  // a task says "task"
                var meta = result["_meta"]?.object ?? [:]
                meta[MCPRevision.serverInfoKey] = Self.serverInfo
                result["_meta"] = .object(meta)
            }
            return (200, ["jsonrpc": "2.0", "id": id, "result": .object(result)], nil)
        } catch let error as RPCError {
            // 2026-07-28 answers an unknown method 404 and invalid params 400; earlier revisions
            // 200. Polling too fast is 429 in every revision.
            var status = if case .modern = revision {
                error.code == -32601 ? 404 : [-32602, -32021].contains(error.code) ? 400 : 200
            } else { 200 }
            if error.retryAfter != nil { status = 429 }
            var object: [String: JSONValue] = ["code": JSONValue(error.code), "message": .string(error.message)]
            if let data = error.data { object["data"] = data }
            return (status, ["jsonrpc": "2.0", "id": id, "error": .object(object)], error.retryAfter)
        } catch {
            return (200, ["jsonrpc": "2.0", "id": id, "error": ["code": -32603, "message": "Internal error"]], nil)
        }
    }

    /// A JSON-RPC error a method answers with.
    struct RPCError: Error {
        let code: Int
        let message: String
        var data: JSONValue? = nil
        /// Set for a poll over the limit: HTTP 429 with this Retry-After.
        var retryAfter: Int? = nil

        /// Polls of one request faster than `PollLimiter` allows.
        static func tooManyPolls(retryAfter: Int) -> RPCError {
            RPCError(code: -32000, message: ResumeText.tooManyPolls, retryAfter: retryAfter)
        }
    }

    /// The server's name and version, as `initialize` and 2026-07-28's `_meta` give them.
    static var serverInfo: JSONValue { ["name": "whereabot", "version": .string(Relay.version)] }

    static let instructions = "Use get_phone_location to ask the user's phone where it is; the user approves on the phone."

    /// How long a client may cache `tools/list` and `server/discover` (2026-07-28): an hour;
    /// the tools change only with a release, and are the same for every user.
    static var cacheHints: [String: JSONValue] { ["ttlMs": 3_600_000, "cacheScope": "public"] }

    /// A method of 2025-03-26, 2025-06-18 or 2025-11-25.
    private func legacyCall(_ method: String, params: [String: JSONValue], agent: AgentIdentity,
                            version: String, id: JSONValue) async throws -> [String: JSONValue] {
        switch method {
        case "initialize":
            let asked = params["protocolVersion"]?.string ?? ""
            let version = MCPRevision.legacyVersions.contains(asked) ? asked : MCPRevision.legacyVersions[0]
            var capabilities: [String: JSONValue] = ["tools": ["listChanged": false]]
            if version == Self.tasksVersion {
                var tasks: [String: JSONValue] = ["cancel": [:], "requests": ["tools": ["call": [:]]]]
                if tasksListed { tasks["list"] = [:] }
                capabilities["tasks"] = .object(tasks)
            }
            return ["protocolVersion": .string(version), "capabilities": .object(capabilities), "serverInfo": Self.serverInfo,
                    "instructions": .string(Self.instructions)]
        case "ping":
            return [:]
        case "tools/list":
            return ["tools": .array(Self.tools(taskSupport: version == Self.tasksVersion))]
        case "tools/call":
            return try await callTool(params, agent: agent, revision: .legacy(version), id: id)
        case _ where version == Self.tasksVersion && method.hasPrefix("tasks/"):
            guard let result = try await legacyTaskCall(method, params: params, agent: agent) else {
                throw RPCError(code: -32601, message: "Method not found: \(method.prefix(64))")
            }
            return result
        default:
            // server/discover included: a client of these revisions falls back to initialize.
            throw RPCError(code: -32601, message: "Method not found: \(method.prefix(64))")
        }
    }

    /// A method of 2026-07-28: no handshake, no ping; `server/discover` says what the
    /// server is.
    private func modernCall(_ method: String, params: [String: JSONValue], agent: AgentIdentity, id: JSONValue) async throws
        -> [String: JSONValue] {
        switch method {
        case "server/discover":
            return ["supportedVersions": .array(MCPRevision.supported.map(JSONValue.string)),
                    "capabilities": ["tools": ["listChanged": false],
                                     "extensions": [MCPRevision.tasksExtension: [:]]],
                    "instructions": .string(Self.instructions)].merging(Self.cacheHints) { $1 }
        case "tools/list":
            if params["cursor"] != nil { throw RPCError(code: -32602, message: "Invalid cursor: tools/list has one page.") }
            return ["tools": .array(Self.tools(taskSupport: false))].merging(Self.cacheHints) { $1 }
        case "tools/call":
            return try await callTool(params, agent: agent, revision: .modern("2026-07-28"), id: id)
        case _ where method.hasPrefix("tasks/"):
            guard let result = try await modernTaskCall(method, params: params, agent: agent) else {
                throw RPCError(code: -32601, message: "Method not found: \(method.prefix(64))")
            }
            return result
        default:
            throw RPCError(code: -32601, message: "Method not found: \(method.prefix(64))")
        }
    }

    private func callTool(_ params: [String: JSONValue], agent: AgentIdentity, revision: MCPRevision, id: JSONValue) async throws
        -> [String: JSONValue] {
        let arguments = params["arguments"]?.object ?? [:]
        switch params["name"]?.string {
        case "get_phone_location":
            return try await locateTool(params, agent: agent, revision: revision, rpcID: id)
        case "list_people_sharing_with_me":
            if let unknown = arguments.keys.sorted().first {
                return RelayError.toolResult("Unknown argument \(unknown.prefix(64)); list_people_sharing_with_me takes no arguments.")
            }
            let people: [Person]
            do {
                people = try await database.peopleSharing(with: agent.userID)
            } catch {
                logger.failure("people_sharing_failed", error)
                return RelayError.databaseUnreachable.toolResult
            }
            let list: [JSONValue] = people.map { ["name": .string($0.name), "email": .string($0.email)] }
            let text = people.isEmpty ? "Nobody shares their location with you yet."
                : people.map { "\($0.name) (\($0.email))" }.joined(separator: "\n")
            return ["content": [["type": "text", "text": .string(text)]], "structuredContent": ["people": .array(list)], "isError": false]
        default:
            throw RPCError(code: -32602, message: Self.unknownTool(params).message)
        }
    }

    private func rpc(status: Int, _ object: JSONValue) -> HTTPResponse {
        HTTPResponse(status: status, headers: ["Content-Type": "application/json"], body: object.bytes)
    }
}
