import Foundation
import HTTPServer
import JSON

/// Durable requests over plain HTTP (docs/protocol.md, "Durable requests"): `POST /v1/locate` with `Prefer:
/// respond-async` (RFC 7240) answers 202 at once; `GET /v1/locate/requests/{request_id}`
/// polls it (optionally waiting up to `wait_secs`), and `DELETE` cancels and forgets it.
/// Another credential's id is 404, exactly as an id that never existed.
struct DurableRoutes: Sendable {
    let locator: LocateService
    let polls: PollLimiter
    let logger: Logger

    /// Where the requests live.
    static let prefix = "/v1/locate/requests/"
    /// The consent window of an async request: default and maximum `timeout_secs`.
    static let defaultTimeout = 300, maximumTimeout = 600
    /// How soon a client should poll again.
    static let retryAfter = "2"

    /// POST /v1/locate with `Prefer: respond-async`: opens a durable request.
    func open(agent: AgentIdentity, person: String?, reason: String?, timeoutSeconds: Int) async -> HTTPResponse {
        let result: LocateService.Result
        do {
            result = try await locator.locate(agent: agent, person: person, reason: reason, timeoutSeconds: timeoutSeconds,
                                              mode: .durable(ttl: nil, listed: false))
        } catch {
            logger.failure("locate_failed", error)
            return RelayError.databaseUnreachable.response
        }
        guard case .waiting(let token, let expiresAt, _, _) = result else { return Self.response(result, now: locator.clock.date) }
        logger.debug("request_opened", ["request": token.tag])
        return Self.json(202, ResumeText.waitingObject(token, expiresAt: expiresAt),
                         headers: ["Location": Self.prefix + token.text, "Retry-After": Self.retryAfter,
                                   "Preference-Applied": "respond-async"])
    }

    /// GET (and HEAD) or DELETE /v1/locate/requests/{request_id}.
    func handle(_ request: HTTPRequest, agent: AgentIdentity) async -> HTTPResponse {
        guard let token = RequestToken(parsing: request.path.dropFirst(Self.prefix.count)) else {
            return RelayError.badInput(ResumeText.malformedRequestID).response
        }
        if request.method == "DELETE" {
            do {
                return try await locator.cancel(agent: agent, token: token, forget: true) == .unknown
                    ? RelayError.notFound(ResumeText.unknownRequest).response : HTTPResponse(status: 204)
            } catch {
                logger.failure("cancel_failed", error, ["request": token.tag])
                return RelayError.databaseUnreachable.response
            }
        }
        var wait = 0
        if let text = request.queryItem("wait_secs") {
            guard let value = DurableParams.waitSeconds(text) else { return RelayError.badInput(ResumeText.waitSeconds).response }
            wait = value
        }
        if let retry = polls.take(token, by: .init(agent)) {
            return RelayError.tooManyPolls(retryAfter: retry).response
        }
        do {
            switch try await polls.polling(token, by: .init(agent), wait: .seconds(wait), {
                try await locator.resume(agent: agent, token: token, wait: $0)
            }) {
            case .unknown:
                return RelayError.notFound(ResumeText.unknownRequest).response
            case .waiting(let state, _):
                return Self.json(202, ResumeText.waitingObject(token, expiresAt: state.expiresAt),
                                 headers: ["Retry-After": Self.retryAfter])
            case .settled(_, let result):
                return Self.response(result, now: locator.clock.date)
            }
        } catch {
            logger.failure("poll_failed", error, ["request": token.tag])
            return RelayError.databaseUnreachable.response
        }
    }

    /// A settled request's response, as POST /v1/locate answers it (docs/protocol.md, "Answers and agent texts");
    /// `now`: the caller's clock.
    static func response(_ result: LocateService.Result, now: Date) -> HTTPResponse {
        switch result {
        case .fix(let json, _):
            return HTTPResponse(status: 200, headers: ["Content-Type": "application/json"], body: Array(json.utf8))
        case .failure(let failure):
            return RelayError.locate(failure, now: now).response
        case .abandoned:
            return RelayError.gone(ResumeText.cancelled).response
        case .waiting(let token, let expiresAt, _, _):
            return json(202, ResumeText.waitingObject(token, expiresAt: expiresAt), headers: ["Retry-After": retryAfter])
        }
    }

    private static func json(_ status: Int, _ object: JSONValue, headers: HTTPHeaders = [:]) -> HTTPResponse {
        var headers = headers
        headers.set("Content-Type", "application/json")
        return HTTPResponse(status: status, headers: headers, body: object.bytes)
    }
}
