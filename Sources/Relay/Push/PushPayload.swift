import Foundation
import JSON
import RelayCore

/// The texts and payloads of pushes, exactly as docs/protocol.md, "What a notification says"
/// gives them. No coordinate is
/// ever part of one.
struct PushPayload: Sendable {
    /// Which notification.
    enum Kind: String, Sendable { case alert, silent, checking }

    let kind: Kind
    let requestID: UUID
    let clientID: String
    /// The agent's name (cleaned), nil when unknown.
    let agentName: String?
    /// Who asks, for shared requests.
    let requester: Person?
    let expiresMs: Int64
    /// The agent's reason for asking (cleaned), nil when it gave none.
    let reason: String?

    /// Creates the payload of one stage; names and the reason are cleaned of control characters.
    init(kind: Kind, requestID: UUID, clientID: String, agentName: String?, requester: Person?, expiresMs: Int64,
         reason: String? = nil) {
        if let reason, case .reason(let cleaned) = LocateReason.check(reason) { self.reason = cleaned } else { self.reason = nil }
        self.kind = kind
        self.requestID = requestID
        self.clientID = clientID
        let name = agentName.map { DisplayText.clean($0, maximumLength: 200) }
        self.agentName = name?.isEmpty == false ? name : nil
        self.requester = requester.map {
            Person(userID: $0.userID, name: DisplayText.clean($0.name, maximumLength: 80), email: $0.email)
        }
        self.expiresMs = expiresMs
    }

    /// The notification's title in `language`.
    static func title(_ language: String, catalog: TextCatalog = .bundled) -> String {
        catalog.text("push.title", language: language)
    }

    /// The notification's body text in `language`.
    func body(_ language: String = "en", catalog: TextCatalog = .bundled) -> String {
        Self.body(kind: kind, agentName: agentName, requester: requester?.name, reason: reason, language: language, catalog: catalog)
    }

    /// "… wants to know your location" (or "is checking"), then ": REASON" when the agent
    /// gave one: the agent's own words, after its name — in `language` (the catalog's
    /// `push.asking…` and `push.checking…` texts; English where it has none).
    static func body(kind: Kind, agentName: String?, requester: String?, reason: String? = nil, language: String = "en",
                     catalog: TextCatalog = .bundled) -> String {
        var key = kind == .checking ? "push.checking" : "push.asking"
        if requester != nil { key += ".shared" }
        if agentName == nil { key += ".unnamed" }
        let text = catalog.text(key, language: language, ["agent": agentName ?? "", "owner": requester ?? ""])
        return reason.map { catalog.text("push.with_reason", language: language, ["text": text, "reason": $0]) } ?? text
    }

    /// The APNs JSON in `language` (≤ 4096 bytes: the agent name is cut until it fits).
    func apns(_ language: String = "en") -> [UInt8] {
        fitting(4096) { payload in
            let requestID = payload.requestID.uuidString.lowercased()
            if payload.kind == .silent {
                return ["aps": ["content-available": 1], "request_id": .string(requestID), "client_id": .string(payload.clientID),
                        "expires_ms": JSONValue(payload.expiresMs),
                        "requester_id": JSONValue(payload.requester?.userID?.uuidString.lowercased())]
            }
            return payload.withReason(["aps": ["alert": ["title": .string(Self.title(language)), "body": .string(payload.body(language))],
                                               "sound": "default",
                                               "thread-id": .string(payload.clientID),
                                               "category": payload.kind == .checking ? "LOCATION_AUTO" : "LOCATION_REQUEST"],
                                       "request_id": .string(requestID), "client_id": .string(payload.clientID),
                                       "agent_name": JSONValue(payload.agentName), "expires_ms": JSONValue(payload.expiresMs),
                                       "requester": payload.requesterJSON])
        }
    }

    /// The Web Push JSON in `language` (≤ 3993 bytes, so the encrypted body stays ≤ 4096).
    func webPush(_ language: String = "en") -> [UInt8] {
        fitting(3993) { payload in
            let requestID = payload.requestID.uuidString.lowercased()
            return payload.withReason(["v": 1, "kind": payload.kind == .checking ? "checking" : "alert", "request_id": .string(requestID),
                    "title": .string(Self.title(language)), "body": .string(payload.body(language)),
                    "client_id": .string(payload.clientID),
                    "agent_name": JSONValue(payload.agentName), "requester": payload.requesterJSON,
                    "expires_ms": JSONValue(payload.expiresMs), "url": .string("/app/?request=\(requestID)")])
        }
    }

    /// The object with `"reason"` added when the agent gave one (payloads without one are
    /// unchanged, byte for byte: the golden files).
    private func withReason(_ object: [String: JSONValue]) -> JSONValue {
        guard let reason else { return .object(object) }
        var object = object
        object["reason"] = .string(reason)
        return .object(object)
    }

    private var requesterJSON: JSONValue {
        guard let requester else { return .null }
        return ["user_id": JSONValue(requester.userID?.uuidString.lowercased()), "name": JSONValue(requester.name),
                "email": JSONValue(requester.email)]
    }

    /// Serializes, cutting the agent name one character at a time until the bytes fit.
    private func fitting(_ limit: Int, _ object: (PushPayload) -> JSONValue) -> [UInt8] {
        var payload = self
        while true {
            let bytes = object(payload).bytes
            // Without a name it fits (every other field is bounded); if not, the sender refuses it.
            guard bytes.count > limit, let name = payload.agentName, !name.isEmpty else { return bytes }
            payload = PushPayload(kind: kind, requestID: requestID, clientID: clientID, agentName: String(name.dropLast()),
                                  requester: requester, expiresMs: expiresMs, reason: reason)
        }
    }
}
