import Foundation

/// Every way a locate can fail, with the HTTP status and the exact agent text (docs/protocol.md,
/// "Answers and agent texts").
///
/// The same text is the body of a non-200 `POST /v1/locate` and the content of an MCP tool
/// result with `isError: true`, so agents see one wording on both transports.
public enum AgentFailure: Equatable, Sendable {
    /// Missing, malformed, expired, revoked or unknown credential.
    case badCredential
    /// The user tapped Reject (`denied`, reason `user`).
    case declined
    /// The phone's own prompt expired (`denied`, reason `no_answer`).
    case noAnswer
    /// Location permission is off (`unavailable`, reason `permission`).
    case permissionOff
    /// No fix could be read (`unavailable`, reason `no_fix` or `error`).
    case noFix
    /// The per-user cap of waiting requests is reached.
    case tooManyWaiting
    /// No device got the ping before the deadline; `email` is the credential's email, if any.
    case notConnected(email: String?)
    /// A device got the ping but nobody answered before the deadline.
    case phoneSilent
    /// `person` matches nobody who shares their location with the agent's user.
    case nobodyNamed(String)
    /// `person` matches several people; each is listed as "Name (email)".
    case ambiguousPerson(String, [Person])
    /// The person asked for declined on their phone.
    case personDeclined(String)
    /// The owner is in quiet hours and the agent may not wake them (docs/protocol.md, "Quiet hours"): nothing was
    /// asked; `local` is the window's end on the owner's clock (HH:MM).
    case quietHours(name: String, until: Date, local: String)

    /// The HTTP status of `POST /v1/locate` for this failure.
    public var status: Int {
        switch self {
        case .badCredential: 401
        case .declined: 403
        case .noAnswer: 408
        case .permissionOff, .noFix: 424
        case .tooManyWaiting: 429
        case .notConnected: 503
        case .phoneSilent: 504
        case .nobodyNamed: 404
        case .ambiguousPerson: 409
        case .personDeclined: 403
        case .quietHours: 503
        }
    }

    /// Seconds until asking again can help (`Retry-After`), when that is known.
    public func retryAfter(now: Date) -> Int? {
        guard case .quietHours(_, let until, _) = self else { return nil }
        return max(1, Int(until.timeIntervalSince(now).rounded(.up)))
    }

    /// The agent text, word for word as docs/protocol.md, "Answers and agent texts" gives it.
    public var agentText: String {
        switch self {
        case .badCredential:
            "Missing, unknown, expired or revoked credential."
        case .declined:
            "The user declined to share their location."
        case .noAnswer:
            "The user did not respond on their phone. Ask them before trying again."
        case .permissionOff:
            "Location access is off for Whereabot on the user's phone. Ask them to allow it in Settings."
        case .noFix:
            "The phone could not get a location fix. Try again in a moment."
        case .tooManyWaiting:
            "Too many location requests are already waiting for this user. Wait for one to finish, then retry."
        case .notConnected(let email):
            "The user's phone is not connected. Ask the user to open the Whereabot app"
                + (email.map { ", signed in as \($0)" } ?? "")
                + " and keep it open, then retry."
        case .phoneSilent:
            "The phone did not answer in time. Ask the user to open Whereabot and retry."
        case .nobodyNamed(let person):
            "Nobody named \(person) shares their location with you. Ask them to share it with you in Whereabot."
        case .ambiguousPerson(let person, let people):
            "Several people named \(person) share their location with you: "
                + people.map { "\($0.name) (\($0.email))" }.joined(separator: ", ")
                + ". Ask again with one of their emails."
        case .personDeclined(let name):
            "\(name) declined to share their location."
        case .quietHours(let name, _, let local):
            "\(name) is in quiet hours until \(local) (their time). Ask again then."
        }
    }
}
