import Foundation

/// What a Web Push service's answer means (docs/protocol.md, "Web Push"): a pure decoder of the service's
/// bytes, fuzzed (Fuzz/PushResponseFuzz.swift). Only 404 and 410 drop a subscription.
enum WebPushResponse {
    /// The result a status stands for (nil: no response).
    static func result(_ status: Int?) -> PushResult {
        guard let status else { return .error }
        switch status {
        case 200..<300: return .sent
        case 404, 410: return .dropped
        case 429: return .throttled
        case 400, 401, 403: return .authError
        case 500...: return .error
        default: return .rejected  // 413 and anything unexpected: kept, logged
        }
    }

    /// Seconds from a `Retry-After` header (delta seconds only; at most 120).
    static func retryAfter(_ value: String?) -> TimeInterval? {
        guard let value, let seconds = Int(value.trimmingCharacters(in: .whitespaces)), (0...120).contains(seconds) else { return nil }
        return TimeInterval(seconds)
    }

    static func delivery(_ response: PushHTTPResponse, _ result: PushResult) -> PushDelivery {
        // A push service's error body is free text: only a short printable prefix is kept.
        let text = String(decoding: response.body.prefix(120), as: UTF8.self)
            .filter { $0.isLetter || $0.isNumber || " .,:_-".contains($0) }
        let reason = response.status.map { "HTTP \($0)" + (text.isEmpty ? "" : " \(text)") } ?? "curl \(response.curlCode)"
        return PushDelivery(result: result, status: response.status, reason: reason)
    }
}
