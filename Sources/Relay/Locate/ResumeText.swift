import Foundation
import JSON
import RelayCore

/// The texts of durable requests (docs/protocol.md, "Durable requests"), for both transports; docs/openapi.yaml and
/// the tool description quote them from here.
enum ResumeText {
    /// HTTP: an id unknown to this credential (never opened, another's, past its TTL).
    static let unknownRequest = "No location request with this id is waiting for you."
    /// MCP: a `request_id` unknown to this credential.
    static let unknownRequestID = unknownRequest + " Ask again without request_id."
    /// A request id that is not one at all.
    static let malformedRequestID = "A request id is wbr_ followed by 32 letters, digits, - or _, exactly as the relay returned it."
    /// Polls faster than 2 a second.
    static let tooManyPolls = "Too many polls of this request. Poll at most every 2 seconds."
    /// A request the agent (or an ended share) cancelled.
    static let cancelled = "The location request was cancelled."
    /// `wait_secs` out of range.
    static let waitSeconds = "wait_secs must be a whole number of seconds from 0 to \(DurableParams.maximumWaitSeconds)."

    /// The tool's text while the person has not answered yet; `joined` when the call
    /// joined the request the same agent had already opened (the person sees one prompt).
    static func waiting(_ token: RequestToken, expiresAt: Date, person: Person?, joined: Bool = false) -> String {
        let whose = person.map { "\($0.name)'s" } ?? "the user's"
        let asked = joined ? "This is the same request you made before (one prompt on \(whose) phone); no answer yet."
            : "Asked \(whose) phone; no answer yet."
        return asked + " A slow answer is normal: call get_phone_location again with request_id \"\(token.text)\" "
            + "to wait for the answer (open until \(clock(expiresAt)) UTC)."
    }

    /// The waiting shape: HTTP's 202 body and the tool's `structuredContent`.
    static func waitingObject(_ token: RequestToken, expiresAt: Date) -> JSONValue {
        ["status": "waiting", "request_id": .string(token.text), "expires_at": .string(timestamp(expiresAt))]
    }

    /// RFC 3339 in UTC with milliseconds: 2026-12-01T16:04:05.000Z.
    static func timestamp(_ date: Date) -> String {
        JSONText.timestamp(milliseconds: Int64((date.timeIntervalSince1970 * 1000).rounded()))
    }

    /// The time of day in UTC: 16:04:05.
    static func clock(_ date: Date) -> String {
        let text = timestamp(date)
        let start = text.index(text.startIndex, offsetBy: 11)
        return String(text[start..<text.index(start, offsetBy: 8)])
    }
}
