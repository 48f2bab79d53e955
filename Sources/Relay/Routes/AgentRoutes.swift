import Foundation
import HTTPServer
import JSON
import RelayCore

/// The agents' routes: `POST /v1/locate` (a waiting call, or with `Prefer: respond-async` a
/// durable request), the durable requests' polls, and `/mcp`. Every one passes the bearer
/// check (`AgentGate`) first, and checks the credential again before a result goes out.
struct AgentRoutes: Sendable {
    let gate: AgentGate
    let locator: LocateService
    /// Async locates and their polls.
    let durable: DurableRoutes
    let mcp: MCPHandler
    let logger: Logger

    /// Default and maximum `timeout_secs` of a locate.
    static let defaultTimeout = 60
    static let maximumTimeout = 120

    /// The texts of a refused locate besides the agent texts of `AgentFailure`;
    /// docs/openapi.yaml is built from these (`OpenAPIDocument`), so each exists once.
    static let timeoutText = "timeout_secs must be a whole number of seconds from 1 to \(maximumTimeout)."
    static let asyncTimeoutText = "timeout_secs must be a whole number of seconds from 1 to \(DurableRoutes.maximumTimeout)."

    /// `GET`, `HEAD` or `DELETE /v1/locate/requests/{request_id}`.
    func locateRequest(_ request: HTTPRequest) async -> HTTPResponse {
        switch await gate.agent(request) {
        case .success(let agent): return await gate.delivering(await durable.handle(request, agent: agent), to: request)
        case .failure(let refusal): return refusal.response
        }
    }

    /// `POST /v1/locate`.
    func locate(_ request: HTTPRequest) async -> HTTPResponse {
        let agent: AgentIdentity
        switch await gate.agent(request) {
        case .success(let identity): agent = identity
        case .failure(let refusal): return refusal.response
        }
        // Prefer: respond-async (docs/protocol.md, "Durable requests"): a durable request,
        // 202 at once, a longer window.
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
        } catch let refusal as RelayError {
            return refusal.response  // the instance stopped while the call waited (`draining`)
        } catch {
            logger.failure("locate_failed", error)
            return RelayError.databaseUnreachable.response
        }
        // Abandoned: the agent hung up, or its key was revoked while it waited (then 401).
        if case .abandoned = result { return await gate.delivering(.text(499, "abandoned"), to: request) }
        return await gate.delivering(DurableRoutes.response(result, now: locator.clock.date), to: request)
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
}
