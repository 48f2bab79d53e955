import Crypto
import Foundation
import JSON

/// What agents send about durable requests, decoded strictly (fuzzed in the MCPRequest
/// target): a task's `ttl`, a tasks/list cursor, HTTP's `Prefer` and `wait_secs`. Pure
/// functions; a refusal is a sentence for the agent.
enum DurableParams {
    /// The range of a task's requested `ttl`, in milliseconds (the result is kept at most 10
    /// minutes past the deadline whatever is asked; a shorter ttl also cuts the deadline).
    static let minimumTTLMilliseconds = 1_000, maximumTTLMilliseconds = 86_400_000
    /// A `ttl` out of range.
    static let ttlText = "task.ttl must be a whole number of milliseconds from \(minimumTTLMilliseconds) to \(maximumTTLMilliseconds)."
    /// The longest long poll of GET /v1/locate/requests/{id}.
    static let maximumWaitSeconds = 60

    /// A task's requested `ttl` (2025-11-25 `params.task.ttl`): nil when absent or null, else
    /// the milliseconds; a refusal for anything but a whole number in range.
    static func ttl(_ task: JSONValue) -> Result<Int?, Refusal> {
        guard let task = task.object else { return .failure(Refusal("params.task must be an object.")) }
        guard let value = task["ttl"], !value.isNull else { return .success(nil) }
        guard let number = value.number, number == number.rounded(),
              (Double(minimumTTLMilliseconds)...Double(maximumTTLMilliseconds)).contains(number)
        else { return .failure(Refusal(ttlText)) }
        return .success(Int(number))
    }

    /// tasks/list's cursor after a request created at `createdMicroseconds` with row `id`:
    /// base64url of "created_us.id".
    static func cursor(createdMicroseconds: Int64, id: UUID) -> String {
        Base64URL.encode(Array("\(createdMicroseconds).\(id.uuidString.lowercased())".utf8))
    }

    /// A cursor `cursor` made; nil when it is not one.
    static func parseCursor(_ text: String) -> (createdMicroseconds: Int64, id: UUID)? {
        guard text.utf8.count <= 100, let bytes = Base64URL.decode(text),
              let parts = String(bytes: bytes, encoding: .utf8)?.split(separator: ".", omittingEmptySubsequences: false),
              parts.count == 2, parts[0].utf8.count <= 17, let microseconds = Int64(parts[0]), microseconds >= 0,
              let id = UUID(uuidString: String(parts[1])) else { return nil }
        return (microseconds, id)
    }

    /// Whether a `Prefer` header asks for `respond-async` (RFC 7240 §4.1: comma-separated
    /// preferences, each a token with an optional value and parameters).
    static func prefersAsync(_ header: String?) -> Bool {
        guard let header, header.utf8.count <= 1024 else { return false }
        return header.split(separator: ",").contains { preference in
            let name = preference.split(separator: ";", maxSplits: 1).first?.split(separator: "=", maxSplits: 1).first ?? ""
            return name.trimmingCharacters(in: .whitespaces).lowercased() == "respond-async"
        }
    }

    /// A poll's `wait_secs`: 0 to 60, digits only; nil for anything else.
    static func waitSeconds(_ text: String) -> Int? {
        guard (1...2).contains(text.utf8.count), text.utf8.allSatisfy({ (48...57).contains($0) }), let value = Int(text),
              value <= maximumWaitSeconds else { return nil }
        return value
    }

    /// Why a parameter was refused, in one sentence.
    struct Refusal: Error, Equatable {
        let message: String
        init(_ message: String) { self.message = message }
    }
}
