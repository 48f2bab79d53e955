import Foundation
import JSON

/// A durable request as an MCP task, in both wire forms: 2025-11-25's (SEP-1686: `ttl`,
/// `pollInterval`) and the 2026-07-28 tasks extension's (SEP-2663: `ttlMs`,
/// `pollIntervalMs`, the result inline once completed). Pure values; no I/O.
struct MCPTask: Equatable {
    /// How often a client should ask (both forms; a client at this pace never meets the
    /// poll limit).
    static let pollIntervalMilliseconds = 2_000

    let token: RequestToken
    /// working, completed or cancelled.
    let status: String
    let statusMessage: String?
    let createdAt: Date
    let lastUpdatedAt: Date
    /// How long the task and its result are kept, from creation.
    let ttlMilliseconds: Int

    /// The task of a request just opened.
    init(opened token: RequestToken, createdAt: Date, expiresAt: Date, keepUntil: Date) {
        self.token = token
        status = "working"
        statusMessage = Self.workingMessage(expiresAt)
        self.createdAt = createdAt
        lastUpdatedAt = createdAt
        ttlMilliseconds = Self.milliseconds(keepUntil.timeIntervalSince(createdAt))
    }

    /// The task of a request as a poll found it; `result` is its outcome once settled.
    init(_ token: RequestToken, state: RelayDatabase.DurableState, result: LocateService.Result?) {
        self.token = token
        createdAt = state.createdAt
        lastUpdatedAt = state.settledAt ?? state.createdAt
        ttlMilliseconds = Self.milliseconds(state.keepUntil.timeIntervalSince(state.createdAt))
        switch (state.outcome, result) {
        case (nil, _):
            status = "working"
            statusMessage = Self.workingMessage(state.expiresAt)
        case (.abandoned?, _):
            status = "cancelled"
            statusMessage = ResumeText.cancelled
        case (_, .failure(let failure)?):
            status = "completed"
            statusMessage = failure.agentText
        case (_, nil):
            status = "completed"
            statusMessage = nil
        default:
            status = "completed"
            statusMessage = "The phone answered."
        }
    }

    /// Whether the task has ended.
    var isTerminal: Bool { status != "working" }

    /// 2025-11-25's `Task`.
    var legacy: [String: JSONValue] { object(ttl: "ttl", pollInterval: "pollInterval") }

    /// The tasks extension's `Task` (2026-07-28): the same fields, its durations named in ms.
    var modern: [String: JSONValue] { object(ttl: "ttlMs", pollInterval: "pollIntervalMs") }

    private func object(ttl: String, pollInterval: String) -> [String: JSONValue] {
        var task: [String: JSONValue] = ["taskId": .string(token.text), "status": .string(status),
                                         "createdAt": .string(ResumeText.timestamp(createdAt)),
                                         "lastUpdatedAt": .string(ResumeText.timestamp(lastUpdatedAt)), ttl: JSONValue(ttlMilliseconds),
                                         pollInterval: JSONValue(Self.pollIntervalMilliseconds)]
        if let statusMessage { task["statusMessage"] = .string(statusMessage) }
        return task
    }

    private static func workingMessage(_ expiresAt: Date) -> String {
        "Waiting for the person to answer on their phone (open until \(ResumeText.clock(expiresAt)) UTC)."
    }

    private static func milliseconds(_ seconds: TimeInterval) -> Int { max(0, Int((seconds * 1000).rounded())) }

    /// tasks/list's cursor after `state`.
    static func cursor(after state: RelayDatabase.DurableState) -> String {
        DurableParams.cursor(createdMicroseconds: state.createdMicroseconds, id: state.id)
    }
}
