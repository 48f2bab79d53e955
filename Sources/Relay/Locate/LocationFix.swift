import Foundation

/// A location fix as it travels sealed from the holder of the answering phone to the
/// waiting instance, and as the agent finally receives it.
public struct LocationFix: Codable, Sendable, Equatable {
    /// Degrees, -90...90.
    public let latitude: Double
    /// Degrees, -180...180.
    public let longitude: Double
    /// Horizontal accuracy radius in meters.
    public let accuracyM: Double
    /// When the phone captured the fix, epoch milliseconds.
    public let timestampMs: Int64
    /// Meters above sea level, when the phone sent it.
    public let altitudeM: Double?
    /// Meters per second, when the phone sent it.
    public let speedMps: Double?
    /// Degrees from north, when the phone sent it.
    public let headingDeg: Double?
    /// The answering device's name.
    public let deviceName: String
    /// The answering device's platform.
    public let platform: String

    enum CodingKeys: String, CodingKey {
        case latitude, longitude, platform
        case accuracyM = "accuracy_m"
        case timestampMs = "timestamp_ms"
        case altitudeM = "altitude_m"
        case speedMps = "speed_mps"
        case headingDeg = "heading_deg"
        case deviceName = "device_name"
    }

    /// Creates a fix.
    public init(latitude: Double, longitude: Double, accuracyM: Double, timestampMs: Int64,
                altitudeM: Double? = nil, speedMps: Double? = nil, headingDeg: Double? = nil,
                deviceName: String, platform: String) {
        self.latitude = latitude
        self.longitude = longitude
        self.accuracyM = accuracyM
        self.timestampMs = timestampMs
        self.altitudeM = altitudeM
        self.speedMps = speedMps
        self.headingDeg = headingDeg
        self.deviceName = deviceName
        self.platform = platform
    }

    /// Whether the values are physically possible (else the answer counts as unavailable).
    public var isPlausible: Bool {
        (-90...90).contains(latitude) && (-180...180).contains(longitude) && accuracyM >= 0 && accuracyM.isFinite
            && timestampMs > 0 && (headingDeg.map { (0..<360).contains($0) } ?? true)
            && (speedMps.map { $0 >= 0 && $0.isFinite } ?? true) && (altitudeM.map(\.isFinite) ?? true)
    }

    /// The body of a 200 answer (and the MCP result): the fix, its capture time and age,
    /// the device, and the person for shared requests.
    public func agentJSON(now: Date, person: Person?) -> String {
        let captured = Date(timeIntervalSince1970: Double(timestampMs) / 1000)
        let formatter = ISO8601DateFormatter()
        formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        var object: [String: Any] = [
            "latitude": latitude, "longitude": longitude, "accuracy_m": accuracyM,
            "captured_at": formatter.string(from: captured),
            "age_s": (max(0, now.timeIntervalSince(captured)) * 10).rounded() / 10,
            "device": ["name": deviceName, "platform": platform],
        ]
        if let altitudeM { object["altitude_m"] = altitudeM }
        if let speedMps { object["speed_mps"] = speedMps }
        if let headingDeg { object["heading_deg"] = headingDeg }
        if let person { object["person"] = ["name": person.name, "email": person.email] }
        let data = (try? JSONSerialization.data(withJSONObject: object, options: [.sortedKeys, .withoutEscapingSlashes])) ?? Data()
        return String(decoding: data, as: UTF8.self)
    }
}

/// What a locate ends with.
public enum LocateOutcome: Sendable, Equatable {
    /// The fix.
    case fix(LocationFix)
    /// A failure with its status and agent text.
    case failure(AgentFailure)
    /// The agent hung up; nobody is left to answer.
    case abandoned
}

/// The `whereabot_answer` payload: a settled request, addressed to its waiter.
public struct AnswerNotification: Decodable, Sendable, Equatable {
    /// The request.
    public let id: UUID
    /// The waiting instance.
    public let waiter: String
    /// location, denied or unavailable.
    public let outcome: String
    /// The reason for denied or unavailable.
    public let reason: String?
    /// The fix sealed to the waiter's reply key (location only).
    public let sealed: String?
}
