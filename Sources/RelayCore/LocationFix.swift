import Foundation
import JSON

/// A location fix as it travels sealed from the holder of the answering phone to the
/// waiting instance, and as the agent finally receives it. A *place* answer (docs/protocol.md, "Places": the
/// phone is inside a place the person shares by its name only) carries the place's name
/// and no position: its latitude, longitude and accuracy are 0 here and never leave the
/// relay (`sealedJSON` and `agentJSON` write the name instead).
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
    /// Whether the person shared this precisely or approximately. Not among the `Codable`
    /// keys (a decoded fix without it is precise): the sealed form writes it only when
    /// approximate, and `init?(sealedJSON:)` reads it.
    public private(set) var precision: Precision = .precise
    /// The place's name for a place answer (cleaned, 1 to `maximumPlaceLength` characters).
    public private(set) var place: String?

    /// How precisely the person shared a fix (docs/protocol.md, "Consent").
    public enum Precision: String, Codable, Sendable {
        /// The phone's own fix.
        case precise
        /// The centre of the 0.025° × 0.025° grid cell that holds the fix, with an accuracy
        /// of at least `approximateAccuracyM`.
        case approximate
        /// Only the name of a place the person defined on the phone (docs/protocol.md, "Places").
        case place
    }

    /// The longest place name an answer may carry (after cleaning).
    public static let maximumPlaceLength = 40

    /// The least accuracy radius an approximate fix claims (metres).
    public static let approximateAccuracyM: Double = 3000

    package enum CodingKeys: String, CodingKey {
        case latitude, longitude, platform
        case accuracyM = "accuracy_m"
        case timestampMs = "timestamp_ms"
        case altitudeM = "altitude_m"
        case speedMps = "speed_mps"
        case headingDeg = "heading_deg"
        case deviceName = "device_name"
    }

    /// The side of the grid cell an approximate fix is the centre of (degrees).
    public static let cellDegrees = 0.025

    /// Creates a fix. An approximate one is made approximate here whatever the phone sent:
    /// its position becomes the centre of the grid cell that holds it (`cellCentre`), and
    /// altitude, speed and heading are dropped (docs/protocol.md, "Consent").
    public init(latitude: Double, longitude: Double, accuracyM: Double, timestampMs: Int64,
                altitudeM: Double? = nil, speedMps: Double? = nil, headingDeg: Double? = nil,
                deviceName: String, platform: String, precision: Precision = .precise) {
        let approximate = precision == .approximate
        self.precision = precision
        self.latitude = approximate ? Self.cellCentre(latitude, limit: 90) : latitude
        self.longitude = approximate ? Self.cellCentre(longitude, limit: 180) : longitude
        self.accuracyM = accuracyM
        self.timestampMs = timestampMs
        self.altitudeM = approximate ? nil : altitudeM
        self.speedMps = approximate ? nil : speedMps
        self.headingDeg = approximate ? nil : headingDeg
        self.deviceName = deviceName
        self.platform = platform
    }

    /// A place answer: the name of the place the phone is in, and when it knew.
    public init(place: String, timestampMs: Int64, deviceName: String, platform: String) {
        self.init(latitude: 0, longitude: 0, accuracyM: 0, timestampMs: timestampMs, deviceName: deviceName, platform: platform)
        self.precision = .place
        self.place = place
    }

    /// The centre of the `cellDegrees` cell that holds `value` (a latitude with `limit` 90,
    /// a longitude with 180), to four decimals; ±`limit` stays in the last cell, and a value
    /// that is not finite stays as it is (`isPlausible` refuses it).
    public static func cellCentre(_ value: Double, limit: Double) -> Double {
        guard value.isFinite else { return value }
        let cells = (limit / cellDegrees).rounded()
        let index = min(max((value / cellDegrees).rounded(.down), -cells), cells - 1)
        return ((index + 0.5) * cellDegrees * 10_000).rounded() / 10_000
    }

    /// Whether the values are physically possible (else the answer counts as unavailable).
    public var isPlausible: Bool {
        if precision == .place {
            guard let place, !place.isEmpty, place.count <= Self.maximumPlaceLength else { return false }
            return timestampMs > 0
        }
        return place == nil && (-90...90).contains(latitude) && (-180...180).contains(longitude) && accuracyM >= 0 && accuracyM.isFinite
            && timestampMs > 0 && (headingDeg.map { (0..<360).contains($0) } ?? true)
            && (speedMps.map { $0 >= 0 && $0.isFinite } ?? true) && (altitudeM.map(\.isFinite) ?? true)
            && (precision == .precise || accuracyM >= Self.approximateAccuracyM)
    }

    /// The body of a 200 answer (and the MCP result): the fix, its capture time and age,
    /// the device, its precision, and the person for shared requests; keys sorted.
    public func agentJSON(now: Date, person: Person?) -> String {
        let age = max(0, now.timeIntervalSince1970 - Double(timestampMs) / 1000)
        var device = JSONText()
        device.string("name", deviceName)
        device.string("platform", platform)
        var json = JSONText()
        if let place {
            json.number("age_s", (age * 10).rounded() / 10)
            json.string("captured_at", JSONText.timestamp(milliseconds: timestampMs))
            json.raw("device", device.object)
            if let person { json.raw("person", Self.card(person)) }
            json.string("place", place)
            json.string("precision", precision.rawValue)
            return json.object
        }
        json.number("accuracy_m", accuracyM)
        json.number("age_s", (age * 10).rounded() / 10)
        if let altitudeM { json.number("altitude_m", altitudeM) }
        json.string("captured_at", JSONText.timestamp(milliseconds: timestampMs))
        json.raw("device", device.object)
        if let headingDeg { json.number("heading_deg", headingDeg) }
        json.number("latitude", latitude)
        json.number("longitude", longitude)
        if let person { json.raw("person", Self.card(person)) }
        json.string("precision", precision.rawValue)
        if let speedMps { json.number("speed_mps", speedMps) }
        return json.object
    }

    private static func card(_ person: Person) -> String {
        var card = JSONText()
        card.string("email", person.email)
        card.string("name", person.name)
        return card.object
    }

    /// Decodes the sealed form (`sealedJSON`, or the `Codable` form it matches); nil when
    /// a field is missing or not of its type.
    package init?(sealedJSON text: String) {
        if let json = JSONValue.parse(text), json["precision"]?.string == Precision.place.rawValue {
            guard let place = json["place"]?.string, let timestamp = json["timestamp_ms"]?.integer,
                  let deviceName = json["device_name"]?.string, let platform = json["platform"]?.string,
                  json["latitude"] == nil, json["longitude"] == nil, json["accuracy_m"] == nil else { return nil }
            self.init(place: place, timestampMs: timestamp, deviceName: deviceName, platform: platform)
            return
        }
        guard let json = JSONValue.parse(text), let latitude = json["latitude"]?.number,
              let longitude = json["longitude"]?.number, let accuracy = json["accuracy_m"]?.number,
              let timestamp = json["timestamp_ms"]?.integer, let deviceName = json["device_name"]?.string,
              let platform = json["platform"]?.string else { return nil }
        func optional(_ key: String) -> Double?? {
            guard let value = json[key], !value.isNull else { return .some(nil) }
            return value.number.map { .some($0) }
        }
        guard let altitude = optional("altitude_m"), let speed = optional("speed_mps"),
              let heading = optional("heading_deg") else { return nil }
        var precision = Precision.precise
        if let value = json["precision"], !value.isNull {
            guard let word = value.string.flatMap(Precision.init(rawValue:)) else { return nil }
            precision = word
        }
        self.init(latitude: latitude, longitude: longitude, accuracyM: accuracy, timestampMs: timestamp,
                  altitudeM: altitude, speedMps: speed, headingDeg: heading, deviceName: deviceName, platform: platform,
                  precision: precision)
    }

    /// The fix as it is sealed for the waiter (the `Codable` form, written by hand).
    package var sealedJSON: String {
        var json = JSONText()
        if let place {
            json.string("place", place)
            json.string("precision", precision.rawValue)
            json.integer("timestamp_ms", timestampMs)
            json.string("device_name", deviceName)
            json.string("platform", platform)
            return json.object
        }
        json.number("latitude", latitude)
        json.number("longitude", longitude)
        json.number("accuracy_m", accuracyM)
        json.integer("timestamp_ms", timestampMs)
        if let altitudeM { json.number("altitude_m", altitudeM) }
        if let speedMps { json.number("speed_mps", speedMps) }
        if let headingDeg { json.number("heading_deg", headingDeg) }
        json.string("device_name", deviceName)
        json.string("platform", platform)
        if precision == .approximate { json.string("precision", precision.rawValue) }
        return json.object
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
    /// A resumable request reached its call's wait bound unanswered: it stays open until
    /// `expiresAt`, and the agent comes back with its token.
    case waiting(expiresAt: Date)
}

/// An answer notification's payload: a settled request, addressed to its waiter.
public struct AnswerNotification: Sendable, Equatable {
    /// The request.
    public let id: UUID
    /// The waiting instance.
    public let waiter: String
    /// How it ended: location, denied or unavailable (expired or abandoned when the waiter
    /// ended it itself).
    public let outcome: RelayStatus.Outcome
    /// The reason for denied or unavailable.
    public let reason: String?
    /// The fix sealed to the waiter's reply key (location only).
    public let sealed: String?

    /// Creates one (the gateway maps its rows into these).
    package init(id: UUID, waiter: String, outcome: RelayStatus.Outcome, reason: String?, sealed: String?) {
        self.id = id
        self.waiter = waiter
        self.outcome = outcome
        self.reason = reason
        self.sealed = sealed
    }
}

extension AnswerNotification {
    /// Decodes the payload from parsed JSON; nil when a field is missing or malformed.
    package init?(json: JSONValue) {
        guard let id = json["id"]?.uuid, let waiter = json["waiter"]?.string, let outcome = json["outcome"]?.string.flatMap(RelayStatus.Outcome.init(rawValue:)) else {
            return nil
        }
        guard let reason = json.optionalMember("reason", \.string), let sealed = json.optionalMember("sealed", \.string) else {
            return nil
        }
        self.init(id: id, waiter: waiter, outcome: outcome, reason: reason, sealed: sealed)
    }
}
