import Foundation

/// A message from a phone (SPEC §5), parsed leniently where the protocol says so: unknown
/// types are ignored, unknown reasons count as `user` (denied) or `error` (unavailable), and
/// impossible coordinates count as unavailable (error).
public enum PhoneMessage: Sendable, Equatable {
    /// The first message: who the device is.
    case hello(deviceID: UUID, name: String, platform: String, appVersion: String)
    /// An answer to ping `id`.
    case answer(id: UUID, PhoneReply)
    /// A diagnostic line from the app (logged without any location).
    case log
    /// Anything else (ignored).
    case unknown

    /// What a phone answered, before sealing.
    public enum PhoneReply: Sendable, Equatable {
        /// A fix (device name and platform are added by the relay).
        case location(latitude: Double, longitude: Double, accuracyM: Double, timestampMs: Int64,
                      altitudeM: Double?, speedMps: Double?, headingDeg: Double?)
        /// A denial.
        case denied(PhoneAnswer.DenialReason)
        /// No location.
        case unavailable(PhoneAnswer.UnavailableReason)
    }

    /// The platforms a device may declare.
    public static let platforms: Set<String> = ["ios", "android", "desktop", "web"]

    /// Parses one text frame or request body; nil when it is not a JSON object.
    public static func parse(_ text: String) -> PhoneMessage? {
        guard let object = (try? JSONSerialization.jsonObject(with: Data(text.utf8))) as? [String: Any] else { return nil }
        switch object["type"] as? String {
        case "hello":
            guard let deviceID = (object["device_id"] as? String).flatMap(UUID.init(uuidString:)) else { return .unknown }
            let platform = (object["platform"] as? String).map { $0.lowercased() } ?? "web"
            return .hello(deviceID: deviceID, name: String((object["device_name"] as? String ?? "").prefix(100)),
                          platform: platforms.contains(platform) ? platform : "web",
                          appVersion: String((object["app_version"] as? String ?? "").prefix(50)))
        case "log":
            return .log
        case "location", "denied", "unavailable":
            guard let id = (object["id"] as? String).flatMap(UUID.init(uuidString:)) else { return .unknown }
            return .answer(id: id, reply(object))
        default:
            return .unknown
        }
    }

    private static func reply(_ object: [String: Any]) -> PhoneReply {
        switch object["type"] as? String {
        case "location":
            func number(_ key: String) -> Double? { (object[key] as? NSNumber).map(\.doubleValue) }
            guard let latitude = number("latitude"), let longitude = number("longitude"),
                  let accuracy = number("accuracy_m"), let timestamp = number("timestamp_ms") else { return .unavailable(.error) }
            let fix = LocationFix(latitude: latitude, longitude: longitude, accuracyM: accuracy, timestampMs: Int64(timestamp),
                                  altitudeM: number("altitude_m"), speedMps: number("speed_mps"),
                                  headingDeg: number("heading_deg"), deviceName: "", platform: "")
            guard fix.isPlausible else { return .unavailable(.error) }
            return .location(latitude: latitude, longitude: longitude, accuracyM: accuracy, timestampMs: Int64(timestamp),
                             altitudeM: fix.altitudeM, speedMps: fix.speedMps, headingDeg: fix.headingDeg)
        case "denied":
            return .denied(PhoneAnswer.DenialReason(rawValue: object["reason"] as? String ?? "user") ?? .user)
        default:
            return .unavailable(PhoneAnswer.UnavailableReason(rawValue: object["reason"] as? String ?? "error") ?? .error)
        }
    }
}
