import Foundation
import JSON

/// The `tasks/*` methods over durable requests: 2025-11-25's (`tasks/get`, `tasks/result`,
/// `tasks/cancel`, `tasks/list`) and the 2026-07-28 tasks extension's (`tasks/get` with the
/// result inline, `tasks/cancel` and `tasks/update` acknowledged). A task id unknown to
/// the caller's credential is -32602, exactly as an id that never existed.
extension MCPHandler {
    /// A tasks/list page.
    static let taskPageSize = 20

    /// -32602 for a task id unknown to this credential.
    static var taskNotFound: RPCError { RPCError(code: -32602, message: "Failed to retrieve task: Task not found") }

    /// 2025-11-25's tasks methods; nil when `method` is none of them.
    func legacyTaskCall(_ method: String, params: [String: JSONValue], agent: AgentIdentity) async throws -> [String: JSONValue]? {
        switch method {
        case "tasks/get":
            let token = try taskToken(params, agent: agent)
            return try await task(token, agent: agent, wait: .zero).task.legacy
        case "tasks/result":
            // Blocks until the task ends, at most the wait bound; then the waiting result
            // (the client asks again, or the model calls get_phone_location with request_id).
            let token = try taskToken(params, agent: agent)
            var result = Self.toolResult(try await task(token, agent: agent, wait: waitBound, naming: true).result, now: locator.clock.date)
            result["_meta"] = [MCPRevision.relatedTaskKey: ["taskId": .string(token.text)]]
            return result
        case "tasks/cancel":
            let token = try taskToken(params, agent: agent)
            let before = try await task(token, agent: agent, wait: .zero).task
            if before.isTerminal {
                throw RPCError(code: -32602, message: "Cannot cancel task: already in terminal status '\(before.status)'")
            }
            _ = try await locator.cancel(agent: agent, token: token, forget: false)
            return try await task(token, agent: agent, wait: .zero).task.legacy
        case "tasks/list":
            return try await taskList(params, agent: agent)
        default:
            return nil
        }
    }

    /// The tasks extension's methods (2026-07-28); nil when `method` is none of them.
    func modernTaskCall(_ method: String, params: [String: JSONValue], agent: AgentIdentity) async throws -> [String: JSONValue]? {
        guard ["tasks/get", "tasks/cancel", "tasks/update"].contains(method) else { return nil }
        guard MCPRevision.declaresTasks(params) else {
            throw RPCError(code: -32021, message: "This request needs the \(MCPRevision.tasksExtension) extension in its client capabilities.",
                           data: ["requiredCapabilities": ["extensions": [MCPRevision.tasksExtension: [:]]]])
        }
        let token = try taskToken(params, agent: agent)
        switch method {
        case "tasks/get":
            let (task, result) = try await task(token, agent: agent, wait: .zero)
            var object = task.modern
            if task.status == "completed" { object["result"] = .object(Self.toolResult(result, now: locator.clock.date)) }
            return object
        case "tasks/cancel":
            if try await locator.cancel(agent: agent, token: token, forget: false) == .unknown { throw Self.taskNotFound }
            return [:]
        default:  // tasks/update: this tool never asks for input; known tasks are acknowledged
            _ = try await task(token, agent: agent, wait: .zero)
            return [:]
        }
    }

    /// The task id of `params`, checked against the poll limit.
    private func taskToken(_ params: [String: JSONValue], agent: AgentIdentity) throws -> RequestToken {
        guard let text = params["taskId"]?.string, let token = RequestToken(parsing: text) else { throw Self.taskNotFound }
        if let wait = polls.take(token, by: .init(agent)) { throw RPCError.tooManyPolls(retryAfter: wait) }
        return token
    }

    /// The task behind `token` and its result (a waiting result while it is open).
    private func task(_ token: RequestToken, agent: AgentIdentity, wait: Duration,
                      naming: Bool = false) async throws -> (task: MCPTask, result: LocateService.Result) {
        switch try await polls.polling(token, by: .init(agent), wait: wait, {
            try await locator.resume(agent: agent, token: token, wait: $0, namingWhileWaiting: naming)
        }) {
        case .unknown:
            throw Self.taskNotFound
        case .waiting(let state, let person):
            return (MCPTask(token, state: state, result: nil), .waiting(token, expiresAt: state.expiresAt, person: person))
        case .settled(let state, let result):
            return (MCPTask(token, state: state, result: result), result)
        }
    }

    /// tasks/list: the credential's own tasks, newest first, a page at a time.
    private func taskList(_ params: [String: JSONValue], agent: AgentIdentity) async throws -> [String: JSONValue] {
        guard let key = locator.requestIDKey, tasksListed else {
            throw RPCError(code: -32601, message: "Method not found: tasks/list (this relay has no REQUEST_ID_KEY)")
        }
        var after: (createdMicroseconds: Int64, id: UUID)?
        if let cursor = params["cursor"], !cursor.isNull {
            guard let text = cursor.string, let parsed = DurableParams.parseCursor(text) else {
                throw RPCError(code: -32602, message: "Invalid cursor: pass the nextCursor of the previous page.")
            }
            after = parsed
        }
        let rows = try await locator.database.durableRequests(binding: .init(agent), before: after, limit: Self.taskPageSize + 1)
        var tasks: [JSONValue] = []
        for (state, wrapped) in rows.prefix(Self.taskPageSize) {
            guard let token = RequestToken.unwrap(wrapped, under: key, id: state.id) else { continue }
            tasks.append(.object(MCPTask(token, state: state, result: nil).legacy))
        }
        var result: [String: JSONValue] = ["tasks": .array(tasks)]
        if rows.count > Self.taskPageSize, let last = rows.prefix(Self.taskPageSize).last?.0 {
            result["nextCursor"] = .string(MCPTask.cursor(after: last))
        }
        return result
    }
}
