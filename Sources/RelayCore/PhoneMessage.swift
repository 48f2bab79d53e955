import Foundation
import JSON

/// A message from a phone (docs/protocol.md, "Messages"), decoded defensively: every byte comes from a peer.
///
/// Unknown types are ignored, unknown reasons count as `user` (denied) or `error`
/// (unavailable), and any number out of range for its field (coordinates, a negative or
/// non-finite accuracy, a `timestamp_ms` no clock can hold, NaN-like values) makes the
/// answer a bad one, handled as unavailable (error). Nothing here traps: every conversion
/// from a peer's number is range-checked first (fuzzed by `Fuzz/PhoneMessageFuzz.swift`).
public enum PhoneMessage: Sendable, Equatable {
    /// The first message: who the device is.
    case hello(deviceID: UUID, name: String, platform: String, appVersion: String)
    /// An answer to ping `id`.
    case answer(id: UUID, PhoneReply)
    /// A fresh access token for the socket (`{"type":"token","access_token":...}`).
    case token(String)
    /// A diagnostic line from the app (logged without any location).
    case log
    /// A request about the phone's own account (docs/protocol.md, "Account messages").
    case account(PhoneAccountRequest)
    /// Anything else (ignored).
    case unknown

    /// What a phone answered, before sealing.
    public enum PhoneReply: Sendable, Equatable {
        /// A fix (device name and platform are added by the relay); `precision` approximate
        /// when the person chose "Share approximate" (its accuracy is then at least 3 km).
        case location(latitude: Double, longitude: Double, accuracyM: Double, timestampMs: Int64,
                      altitudeM: Double?, speedMps: Double?, headingDeg: Double?, precision: LocationFix.Precision = .precise)
        /// The name of the place the phone is in, shared instead of a position (docs/protocol.md, "Places").
        case place(name: String, timestampMs: Int64)
        /// A denial.
        case denied(PhoneAnswer.DenialReason)
        /// No location.
        case unavailable(PhoneAnswer.UnavailableReason)
    }

    /// The platforms a device may declare.
    public static let platforms: Set<String> = ["ios", "android", "desktop", "web"]
    /// Longest device name kept (as `public.devices.name` allows).
    public static let maximumDeviceNameLength = 100
    /// Longest app version kept.
    public static let maximumAppVersionLength = 50
    /// Longest access token accepted in a `token` message (Supabase's are about 1 KiB).
    public static let maximumTokenLength = 8 * 1024
    /// Latest capture time accepted, epoch milliseconds (the year 3000): beyond any clock,
    /// and far inside Int64.
    public static let latestTimestampMs: Double = 32_503_680_000_000
    /// Largest accuracy radius, altitude magnitude and speed accepted (meters, m/s):
    /// generous bounds that still keep every value a plain finite number.
    public static let maximumMagnitude: Double = 1e7

    /// Decodes one text frame or request body; nil when it is not a JSON object.
    public static func parse(_ text: String) -> PhoneMessage? {
        guard let object = JSONValue.parse(text), case .object = object else { return nil }
        switch object["type"]?.string {
        case "hello":
            guard let deviceID = object["device_id"]?.uuid else { return .unknown }
            let platform = object["platform"]?.string?.lowercased() ?? "web"
            return .hello(deviceID: deviceID,
                          name: DisplayText.clean(object["device_name"]?.string ?? "", maximumLength: maximumDeviceNameLength),
                          platform: platforms.contains(platform) ? platform : "web",
                          appVersion: DisplayText.clean(object["app_version"]?.string ?? "", maximumLength: maximumAppVersionLength))
        case "token":
            guard let token = object["access_token"]?.string, !token.isEmpty, token.utf8.count <= maximumTokenLength else {
                return .unknown
            }
            return .token(token)
        case "log":
            return .log
        case "location", "denied", "unavailable":
            guard let id = object["id"]?.uuid else { return .unknown }
            return .answer(id: id, reply(object))
        default:
            guard let request = PhoneAccountRequest.parse(object) else { return .unknown }
            return request.map { .account($0) } ?? .unknown
        }
    }

    private static func reply(_ object: JSONValue) -> PhoneReply {
        switch object["type"]?.string {
        case "location" where object["precision"]?.string == LocationFix.Precision.place.rawValue:
            return place(object) ?? .unavailable(.noFix)
        case "location":
            // A fix that claims to be approximate but is sharper than a grid cell is a bad
            // answer: the agent gets the no-fix text, never a precise fix labelled otherwise.
            if object["precision"]?.string == LocationFix.Precision.approximate.rawValue,
               let accuracy = object["accuracy_m"]?.number, !(accuracy >= LocationFix.approximateAccuracyM) {
                return .unavailable(.noFix)
            }
            return location(object) ?? .unavailable(.error)
        case "denied":
            return .denied(PhoneAnswer.DenialReason(rawValue: object["reason"]?.string ?? "user") ?? .user)
        default:
            return .unavailable(PhoneAnswer.UnavailableReason(rawValue: object["reason"]?.string ?? "error") ?? .error)
        }
    }

    /// A place answer: its name cleaned (controls and invisible characters removed) and 1 to
    /// `LocationFix.maximumPlaceLength` characters, a capture time, and no position at all;
    /// nil (a bad answer: the agent gets the no-fix text) otherwise.
    private static func place(_ object: JSONValue) -> PhoneReply? {
        for key in ["latitude", "longitude", "accuracy_m", "altitude_m", "speed_mps", "heading_deg"] {
            if let value = object[key], !value.isNull { return nil }
        }
        guard let raw = object["place"]?.string, raw.utf8.count <= 4 * LocationFix.maximumPlaceLength * 4,
              let timestamp = object["timestamp_ms"]?.number, timestamp >= 1, timestamp <= latestTimestampMs else { return nil }
        let name = DisplayText.clean(raw, maximumLength: LocationFix.maximumPlaceLength + 1)
        guard !name.isEmpty, name.count <= LocationFix.maximumPlaceLength else { return nil }
        return .place(name: name, timestampMs: Int64(timestamp.rounded(.down)))  // in range: checked above
    }

    /// A plausible fix, or nil when any field is missing, not a number or out of range.
    private static func location(_ object: JSONValue) -> PhoneReply? {
        guard let latitude = object["latitude"]?.number, (-90...90).contains(latitude),
              let longitude = object["longitude"]?.number, (-180...180).contains(longitude),
              let accuracy = object["accuracy_m"]?.number, (0...maximumMagnitude).contains(accuracy),
              let timestamp = object["timestamp_ms"]?.number, timestamp >= 1, timestamp <= latestTimestampMs else { return nil }
        /// An optional field: absent (or null) is fine, present must be a number in range.
        func optional(_ key: String, _ range: ClosedRange<Double>) -> Double?? {
            guard let value = object[key], !value.isNull else { return .some(nil) }
            guard let number = value.number, range.contains(number) else { return nil }
            return .some(number)
        }
        guard let altitude = optional("altitude_m", -maximumMagnitude...maximumMagnitude),
              let speed = optional("speed_mps", 0...maximumMagnitude),
              let heading = optional("heading_deg", 0...360) else { return nil }
        var precision = LocationFix.Precision.precise
        if let value = object["precision"], !value.isNull {
            guard let word = value.string.flatMap(LocationFix.Precision.init(rawValue:)) else { return nil }
            precision = word
        }
        return .location(latitude: latitude, longitude: longitude, accuracyM: accuracy,
                         timestampMs: Int64(timestamp.rounded(.down)),  // in range: checked above
                         altitudeM: altitude, speedMps: speed, headingDeg: heading.map { $0 == 360 ? 0 : $0 },
                         precision: precision)
    }
}
