import Foundation
import HTTPServer
import JSON
import RelayCore

/// Every refusal and failure the relay answers an agent or a phone with: a stable code, the
/// HTTP status, the exact text (docs/protocol.md) and, when retrying later can help, how
/// many seconds to wait. It renders itself once for HTTP (`response`: the text as the body,
/// `Retry-After`) and once for MCP (`toolResult`: the same text with `isError`), so a
/// status, a text or a retry delay is written in one place whatever the transport.
///
/// Descriptions carry the code and the text only: never SQL, a token or a coordinate.
public struct RelayError: Error, Equatable, Sendable, CustomStringConvertible {
    /// What went wrong, as a stable name for logs, metrics and tests.
    public enum Code: String, Sendable {
        /// An agent-visible outcome of a locate (`AgentFailure`).
        case locate
        /// The database cannot be reached.
        case databaseUnreachable = "database_unreachable"
        /// A credential cannot be checked now (the database or the JWKS is down).
        case cannotCheckCredentials = "cannot_check_credentials"
        /// The client address failed authentication too often.
        case rateLimited = "rate_limited"
        /// The instance drains before a restart.
        case draining
        /// The instance is not ready (/readyz).
        case notReady = "not_ready"
        /// Too many sockets wait for their hello.
        case tooManyWaitingForHello = "too_many_waiting_for_hello"
        /// A durable request polled too often.
        case tooManyPolls = "too_many_polls"
        /// A parameter or body that is not what the route takes.
        case badInput = "bad_input"
        /// A credential of the wrong kind, a removed device, or a foreign origin.
        case forbidden
        /// An id unknown to the caller.
        case notFound = "not_found"
        /// A request that ended (cancelled, answered, gone).
        case gone
    }

    /// The stable name of the failure.
    public let code: Code
    /// The HTTP status.
    public let status: Int
    /// The exact text: an HTTP body, an MCP tool result's content.
    public let text: String
    /// Seconds to wait before retrying, when retrying later can help.
    public let retryAfter: Int?

    /// A failure with its status, text and retry delay.
    public init(_ code: Code, _ status: Int, _ text: String, retryAfter: Int? = nil) {
        self.code = code
        self.status = status
        self.text = text
        self.retryAfter = retryAfter
    }

    public var description: String { "\(code.rawValue) (\(status)): \(text)" }

    /// The HTTP response: the text as `text/plain`, `Retry-After` when set, and `headers`.
    public func response(headers extra: HTTPHeaders = [:]) -> HTTPResponse {
        var headers = extra
        if let retryAfter { headers.set("Retry-After", String(retryAfter)) }
        return .text(status, text, headers: headers)
    }

    /// The HTTP response with no extra headers.
    public var response: HTTPResponse { response() }

    /// The MCP tool result: the text as its content, `isError: true`.
    public var toolResult: [String: JSONValue] {
        Self.toolResult(text)
    }

    /// An MCP tool result refusing a call with `text` (an argument the tool does not take).
    public static func toolResult(_ text: String) -> [String: JSONValue] {
        ["content": [["type": "text", "text": .string(text)]], "isError": true]
    }

    // MARK: - The failures

    /// A locate's outcome for the agent (its status and text: docs/protocol.md, "Answers and
    /// agent texts"); `now` is the caller's clock, which a Retry-After until a time counts from.
    public static func locate(_ failure: AgentFailure, now: Date) -> RelayError {
        RelayError(.locate, failure.status, failure.agentText, retryAfter: failure.retryAfter(now: now))
    }

    /// The database cannot be reached: agents and phones retry in a few seconds.
    public static let databaseUnreachable = RelayError(
        .databaseUnreachable, 503, "The relay cannot reach its database right now. Retry in a few seconds.", retryAfter: 5)

    /// A credential cannot be checked now.
    public static let cannotCheckCredentials = RelayError(
        .cannotCheckCredentials, 503, "The relay cannot check credentials right now. Retry in a few seconds.", retryAfter: 5)

    /// Too many failed authentications from the client's address; retry in `seconds`.
    public static func rateLimited(retryAfter seconds: Int) -> RelayError {
        RelayError(.rateLimited, 429, "Too many failed authentications from this address. Retry later.", retryAfter: seconds)
    }

    /// What agents and phones get from a draining instance.
    public static let draining = RelayError(
        .draining, 503, "This relay instance is restarting. Retry in a few seconds.", retryAfter: 2)

    /// /readyz of an instance that is not ready: `body` names what is missing.
    public static func notReady(_ body: String) -> RelayError {
        RelayError(.notReady, 503, body, retryAfter: 5)
    }

    /// Past the sockets an account may have waiting for their hello, or past the relay's
    /// queue of them.
    public static let tooManyWaitingForHello = RelayError(
        .tooManyWaitingForHello, 429, "Too many sockets are waiting for their hello. Say hello on the open ones, then retry.",
        retryAfter: HelloWaitingRoom.retryAfterSeconds)

    /// A durable request polled more often than its budget; retry in `seconds`.
    public static func tooManyPolls(retryAfter seconds: Int) -> RelayError {
        RelayError(.tooManyPolls, 429, ResumeText.tooManyPolls, retryAfter: seconds)
    }

    /// Input the route does not take (400, or `status` for a body of the wrong kind).
    public static func badInput(_ text: String, status: Int = 400) -> RelayError {
        RelayError(.badInput, status, text)
    }

    /// A caller this route refuses whatever it asks (403).
    public static func forbidden(_ text: String) -> RelayError {
        RelayError(.forbidden, 403, text)
    }

    /// An id the caller does not know (404).
    public static func notFound(_ text: String) -> RelayError {
        RelayError(.notFound, 404, text)
    }

    /// A request that ended (410).
    public static func gone(_ text: String) -> RelayError {
        RelayError(.gone, 410, text)
    }
}
