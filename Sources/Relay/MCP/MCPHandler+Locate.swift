import Foundation
import JSON
import RelayCore

/// `get_phone_location`: a first call (which answers "still waiting" at the wait bound), a
/// resumed call with `request_id`, and a call made a task (2025-11-25's `params.task`, or
/// the 2026-07-28 tasks extension when the client declares it).
extension MCPHandler {
    /// The consent window of a plain call, and of a task (docs/protocol.md, "Durable requests").
    static let callTimeouts = 1...120, taskTimeouts = 1...600
    static let defaultCallTimeout = 60, defaultTaskTimeout = 300

    func locateTool(_ params: [String: JSONValue], agent: AgentIdentity, revision: MCPRevision,
                    rpcID: JSONValue = .null) async throws -> [String: JSONValue] {
        let arguments = params["arguments"]?.object ?? [:]
        if let unknown = arguments.keys.sorted().first(where: { !["timeout_secs", "person", "reason", "request_id"].contains($0) }) {
            return RelayError.toolResult(
                "Unknown argument \(unknown.prefix(64)); get_phone_location takes timeout_secs, person, reason and request_id.")
        }
        if let value = arguments["request_id"] {
            guard let text = value.string, let token = RequestToken(parsing: text) else {
                return RelayError.toolResult(ResumeText.unknownRequestID)
            }
            return try await resumeTool(token, agent: agent)
        }
        // 2025-11-25 asks for a task with params.task; 2026-07-28 clients declare the extension.
        let legacyTask = revision == .legacy("2025-11-25") ? params["task"] : nil
        let modernTask = if case .modern = revision { MCPRevision.declaresTasks(params) } else { false }
        var requestedTTL: Int?
        if let legacyTask {
            switch DurableParams.ttl(legacyTask) {
            case .success(let ttl): requestedTTL = ttl
            case .failure(let refusal): throw RPCError(code: -32602, message: refusal.message)
            }
        }
        let range = legacyTask != nil ? Self.taskTimeouts : Self.callTimeouts
        var timeout = legacyTask != nil ? Self.defaultTaskTimeout : Self.defaultCallTimeout
        if let value = arguments["timeout_secs"] {
            // Range-checked as a Double first: Int of 1e300 would not fit.
            guard let number = value.number, number == number.rounded(),
                  (Double(range.lowerBound)...Double(range.upperBound)).contains(number) else {
                // SEP-1303: input validation errors are tool results the model can read.
                return RelayError.toolResult("timeout_secs must be a whole number from 1 to \(range.upperBound).")
            }
            timeout = Int(number)
        }
        if let person = arguments["person"], person.string == nil {
            return RelayError.toolResult("person must be a string (a name or an email).")
        }
        var reason: String?
        if let value = arguments["reason"], !value.isNull {
            guard let text = value.string else { return RelayError.toolResult("reason must be a string.") }
            switch LocateReason.check(text) {
            case .reason(let cleaned): reason = cleaned
            case .tooLong: return RelayError.toolResult(LocateReason.tooLongText)
            }
        }
        // A task's ttl shorter than its consent window cuts the window: nothing is kept past it.
        if let requestedTTL { timeout = max(1, min(timeout, requestedTTL / 1000)) }
        let mode: LocateService.Mode = legacyTask != nil
            ? .durable(ttl: requestedTTL.map { .milliseconds($0) }, listed: tasksListed) : .call(bound: waitBound)
        let opened = locator.clock.date
        let result: LocateService.Result
        // The call's request is known by its JSON-RPC id while it runs, for an explicit cancel.
        defer { inFlight.end(rpcID, for: agent, now: locator.clock.date) }
        do {
            result = try await locator.locate(agent: agent, person: arguments["person"]?.string, reason: reason,
                                              timeoutSeconds: timeout, mode: mode) { token in
                inFlight.begin(rpcID, token: token, for: agent)
            }
        } catch let refusal as RelayError {
            return refusal.toolResult  // the instance stopped while the call waited (`draining`)
        } catch {
            logger.failure("locate_failed", error)
            return RelayError.databaseUnreachable.toolResult
        }
        if case .waiting(let token, let expiresAt, _, _) = result, legacyTask != nil || modernTask {
            // The ttl granted: the one asked for, at most the deadline plus 10 minutes.
            let longest = (timeout + 600) * 1000
            let ttl = min(requestedTTL ?? longest, longest)
            let task = MCPTask(opened: token, createdAt: opened, expiresAt: expiresAt,
                               keepUntil: opened.addingTimeInterval(Double(ttl) / 1000))
            logger.debug("task_opened", ["request": token.tag])
            return legacyTask != nil ? ["task": .object(task.legacy)] : task.modern.merging(["resultType": "task"]) { $1 }
        }
        return Self.toolResult(result, now: locator.clock.date)
    }

    /// A call with `request_id`: waits at most the wait bound for that request's outcome.
    private func resumeTool(_ token: RequestToken, agent: AgentIdentity) async throws -> [String: JSONValue] {
        if let wait = polls.take(token, by: .init(agent)) { throw RPCError.tooManyPolls(retryAfter: wait) }
        do {
            switch try await polls.polling(token, by: .init(agent), wait: waitBound, {
                try await locator.resume(agent: agent, token: token, wait: $0, namingWhileWaiting: true)
            }) {
            case .unknown: return RelayError.toolResult(ResumeText.unknownRequestID)
            case .waiting(let state, let person): return Self.toolResult(.waiting(token, expiresAt: state.expiresAt, person: person), now: locator.clock.date)
            case .settled(_, let result): return Self.toolResult(result, now: locator.clock.date)
            }
        } catch {
            logger.failure("resume_failed", error, ["request": token.tag])
            return RelayError.databaseUnreachable.toolResult
        }
    }

    /// The tool result of a locate's result (docs/protocol.md, "MCP" and "Durable
    /// requests"): the fix, the waiting shape, or the agent text as an error (`now`: the
    /// caller's clock).
    static func toolResult(_ result: LocateService.Result, now: Date) -> [String: JSONValue] {
        switch result {
        case .fix(let json, let structured):
            return ["content": [["type": "text", "text": .string(json)]],
                    "structuredContent": JSONValue.parse(structured) ?? [:],
                    "isError": false]
        case .waiting(let token, let expiresAt, let person, let joined):
            let text = ResumeText.waiting(token, expiresAt: expiresAt, person: person, joined: joined)
            return ["content": [["type": "text", "text": .string(text)]],
                    "structuredContent": ResumeText.waitingObject(token, expiresAt: expiresAt), "isError": false]
        case .failure(let failure):
            return RelayError.locate(failure, now: now).toolResult
        case .abandoned:
            return RelayError.gone(ResumeText.cancelled).toolResult
        }
    }
}
