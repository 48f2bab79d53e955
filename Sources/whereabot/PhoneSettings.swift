import Foundation
import JSON
import Relay
import RelayCore

/// What `whereabot phone --settings FILE` reads (docs/protocol.md, "Places" and "Quiet hours", as the browser
/// phone keeps it):
/// places, matched here only and never sent, and quiet-hours windows, sent to the relay
/// after each hello (which checks each and answers with the stored list or a sentence
/// naming a bad one).
///
/// ```json
/// {"places": [{"name": "Home", "latitude": 52.52, "longitude": 13.405, "radius_m": 250, "share": "name"}],
///  "quiet_hours": [{"days": [1,2,3,4,5,6,7], "start": "22:00", "end": "07:00", "time_zone": "Europe/Berlin"}]}
/// ```
struct PhoneSettings {
    /// How much a place shares.
    enum Share: String {
        case name, approximate, precise
    }

    /// A place: a name, a centre and a radius (100 m to 5 km).
    struct Place {
        let name: String
        let latitude: Double
        let longitude: Double
        let radiusM: Double
        let share: Share
    }

    /// The places, smallest first when several hold a position.
    let places: [Place]
    /// The windows as the relay takes them; nil: leave the account's windows as they are.
    let quietHours: JSONValue?

    static let empty = PhoneSettings(places: [], quietHours: nil)

    /// Reads `path`; a sentence naming what is wrong when it cannot be used.
    static func load(_ path: String) throws -> PhoneSettings {
        guard let data = FileManager.default.contents(atPath: path), data.count <= 64 * 1024 else {
            throw CommandError.usage("--settings: cannot read \(path) (at most 64 KiB)")
        }
        guard let json = JSONValue.parse(String(decoding: data, as: UTF8.self)), case .object = json else {
            throw CommandError.usage("--settings: \(path) is not a JSON object")
        }
        var places: [Place] = []
        if case .array(let list)? = json["places"] {
            for (index, entry) in list.enumerated() {
                let name = DisplayText.clean(entry["name"]?.string ?? "", maximumLength: LocationFix.maximumPlaceLength + 1)
                guard !name.isEmpty, name.count <= LocationFix.maximumPlaceLength,
                      let latitude = entry["latitude"]?.number, (-90...90).contains(latitude),
                      let longitude = entry["longitude"]?.number, (-180...180).contains(longitude),
                      let radius = entry["radius_m"]?.number, (100...5000).contains(radius),
                      let share = Share(rawValue: entry["share"]?.string ?? "name") else {
                    throw CommandError.usage("--settings: place \(index + 1) needs a name of 1 to 40 characters, a latitude, "
                                             + "a longitude, a radius_m of 100 to 5000 and a share of name, approximate or precise")
                }
                places.append(Place(name: name, latitude: latitude, longitude: longitude, radiusM: radius, share: share))
            }
        }
        var quiet: JSONValue?
        if let windows = json["quiet_hours"] {
            guard case .array = windows else { throw CommandError.usage("--settings: quiet_hours is a list of windows") }
            quiet = windows
        }
        return PhoneSettings(places: places.sorted { $0.radiusM < $1.radiusM }, quietHours: quiet)
    }

    /// The smallest place holding (`latitude`, `longitude`), if any.
    func place(at latitude: Double, _ longitude: Double) -> Place? {
        places.first { Self.distanceM(latitude, longitude, $0.latitude, $0.longitude) <= $0.radiusM }
    }

    /// Metres between two points (haversine, the mean Earth radius).
    static func distanceM(_ lat1: Double, _ lon1: Double, _ lat2: Double, _ lon2: Double) -> Double {
        let rad = Double.pi / 180
        let dLat = (lat2 - lat1) * rad, dLon = (lon2 - lon1) * rad
        let h = pow(sin(dLat / 2), 2) + cos(lat1 * rad) * cos(lat2 * rad) * pow(sin(dLon / 2), 2)
        return 2 * 6_371_008.8 * asin(min(1, h.squareRoot()))
    }
}

/// Quiet-hours windows as a terminal line: "22:00-07:00 Europe/Berlin (days 1,2,3)".
enum QuietText {
    static func describe(_ windows: JSONValue?) -> String {
        guard case .array(let list)? = windows, !list.isEmpty else { return "none" }
        return list.map { window in
            var days: [JSONValue] = []
            if case .array(let list)? = window["days"] { days = list }
            let numbers = days.compactMap { $0.integer.map(String.init) }.joined(separator: ",")
            return "\(window["start"]?.string ?? "?")-\(window["end"]?.string ?? "?") \(window["time_zone"]?.string ?? "?") (days \(numbers))"
        }.joined(separator: "; ")
    }
}
