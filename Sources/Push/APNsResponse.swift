import Foundation
import JSON

/// What an APNs answer means (docs/protocol.md, "APNs"): a pure
/// decoder of the service's bytes, fuzzed (Fuzz/PushResponseFuzz.swift).
enum APNsResponse {
    /// What a response means (docs/protocol.md, "APNs").
    enum Action: Equatable {
        case result(PushResult)
        case expiredProviderToken
        case retry
    }

    /// Classifies one APNs response.
    static func action(_ response: PushHTTPResponse) -> Action {
        guard let status = response.status else { return .retry }
        let reason = reason(response)
        switch (status, reason) {
        case (200, _): return .result(.sent)
        case (400, "BadDeviceToken"), (400, "DeviceTokenNotForTopic"), (410, _): return .result(.dropped)
        case (403, "ExpiredProviderToken"): return .expiredProviderToken
        case (403, _): return .result(.authError)
        case (429, "TooManyProviderTokenUpdates"): return .result(.authError)
        case (429, _): return .result(.throttled)
        case (500, _), (503, _): return .retry
        default: return .result(.rejected)  // 413 PayloadTooLarge, other 400s, 404, 405: our bug
        }
    }

    static func reason(_ response: PushHTTPResponse) -> String? {
        guard let reason = JSONValue.parse(bytes: response.body)?["reason"]?.string,
              reason.count <= 64, reason.allSatisfy({ $0.isLetter || $0.isNumber }) else { return nil }
        return reason
    }

    static func delivery(_ response: PushHTTPResponse, result: PushResult) -> PushDelivery {
        var unregisteredAt: Date?
        if response.status == 410, let milliseconds = JSONValue.parse(bytes: response.body)?["timestamp"]?.number,
           milliseconds > 0, milliseconds < 32_503_680_000_000 {
            unregisteredAt = Date(timeIntervalSince1970: milliseconds / 1000)  // APNs sends milliseconds
        }
        let reason = reason(response) ?? response.status.map { "HTTP \($0)" } ?? "curl \(response.curlCode)"
        return PushDelivery(result: result, status: response.status, reason: reason, unregisteredAt: unregisteredAt)
    }

}
