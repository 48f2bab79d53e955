import Foundation
@testable import Relay
import Testing

/// The hand-written JSON of the hot path: the parser agrees with Foundation's on what is
/// JSON and what it means, refuses what RFC 8259 refuses, and the writers produce what
/// the Codable and Foundation forms produced before (so instances of two versions agree).
@Suite struct JSONCodecTests {
    /// Documents both parsers accept, and what each sees in them.
    @Test(arguments: [
        #"{"type":"location","id":"6f1c3d6e-2b0a-4c1e-9d7a-0b9e1f2a3c4d","latitude":52.52,"longitude":-13.405e0,"accuracy_m":12}"#,
        #"{"a":[1,2.5,-0.0,1E3,true,false,null,{"b":"c\n\"\\\/\u00e9\ud83d\ude00"}],"x":""}"#,
        #"  [ ]  "#, #""just a string""#, "0", "-12.5e-3", #"{"dup":1,"dup":2}"#,
        #"{"name":"Zoë's 📱 \u202e","n":123456789012345}"#,
    ])
    func agreesWithFoundation(text: String) throws {
        let ours = try #require(JSONValue.parse(text))
        let theirs = try JSONSerialization.jsonObject(with: Data(text.utf8), options: [.fragmentsAllowed])
        #expect(Self.same(ours, theirs), "\(text)")
    }

    /// What RFC 8259 does not allow, and what would cost too much.
    @Test(arguments: [
        "", " ", "{", "}", "[1,]", #"{"a":1,}"#, "{'a':1}", "[01]", "[1.]", "[.5]", "[+1]", "[1e]", "NaN", "[Infinity]",
        "tru", "nul", #""\x""#, #""\u12""#, #""\ud800""#, #""\udc00x""#, "\"a\u{01}b\"", "[1] [2]", "{\"a\" 1}",
        "// comment\n1", String(repeating: "[", count: 40) + String(repeating: "]", count: 40),
    ])
    func refusesWhatIsNotJSON(text: String) {
        #expect(JSONValue.parse(text) == nil, "\(text)")
    }

    /// A number beyond a Double parses (the message is JSON) but has no value.
    @Test func overflowingNumbersHaveNoValue() throws {
        let json = try #require(JSONValue.parse(#"{"timestamp_ms":1e400,"ok":1}"#))
        #expect(json["timestamp_ms"]?.number == nil && json["ok"]?.number == 1)
        #expect(json["ok"]?.integer == 1 && JSONValue.parse("1.5")?.integer == nil)
    }

    /// The timestamp writer agrees with ISO8601DateFormatter over four centuries.
    @Test func timestampsMatchTheFormatter() {
        let formatter = ISO8601DateFormatter()
        formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        var milliseconds: Int64 = 1
        var generator = SystemRandomNumberGenerator()
        for _ in 0..<2_000 {
            let date = Date(timeIntervalSince1970: Double(milliseconds) / 1000)
            #expect(JSONText.timestamp(milliseconds: milliseconds) == formatter.string(from: date), "\(milliseconds)")
            milliseconds = Int64.random(in: 1...13_000_000_000_000, using: &generator)
        }
        #expect(JSONText.timestamp(milliseconds: 951_782_400_000) == "2000-02-29T00:00:00.000Z")
        #expect(JSONText.timestamp(milliseconds: 1_796_000_000_120) == "2026-11-30T00:53:20.120Z")
    }

    /// Strings round-trip through the writer and both parsers, whatever they hold.
    @Test func stringsAreEscaped() throws {
        let nasty = "quote \" backslash \\ slash / newline \n tab \t nul \u{0} bell \u{7} del \u{7f} bidi \u{202e} emoji 😀"
        var json = JSONText()
        json.string("s", nasty)
        json.string("n", nil)
        let text = json.object
        #expect(!text.contains("\n") && !text.contains("\u{0}"))
        #expect(JSONValue.parse(text)?["s"]?.string == nasty && JSONValue.parse(text)?["n"]?.isNull == true)
        let foundation = try #require(try JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any])
        #expect(foundation["s"] as? String == nasty)
    }

    /// The sealed fix written by hand decodes as the Codable form and back.
    @Test func sealedFixRoundTrips() throws {
        let fix = LocationFix(latitude: -33.8688, longitude: 151.2093, accuracyM: 5, timestampMs: 1_796_000_000_120,
                              altitudeM: -12.25, speedMps: nil, headingDeg: 359.5, deviceName: "Ada \"phone\"", platform: "ios")
        #expect(try JSONDecoder().decode(LocationFix.self, from: Data(fix.sealedJSON.utf8)) == fix)
        #expect(LocationFix(sealedJSON: fix.sealedJSON) == fix)
        #expect(LocationFix(sealedJSON: String(decoding: try JSONEncoder().encode(fix), as: UTF8.self)) == fix)
        #expect(LocationFix(sealedJSON: #"{"latitude":"1"}"#) == nil)
    }

    /// The ping is the phone's documented form (SPEC §5) without the reply key, and reads
    /// back (with the key the database adds) as itself.
    @Test func pingIsThePhonesForm() throws {
        let requester = UUID(), id = UUID()
        let ping = LocateMessage(id: id, clientID: "agent-key", agentName: "Claude \"2\"", expiresMs: 1_796_000_000_000,
                                 requester: Person(userID: requester, name: "Bob", email: "bob@example.com"),
                                 replyKey: Array(repeating: 7, count: 32))
        let written = try #require(try JSONSerialization.jsonObject(with: Data(ping.phoneJSON.utf8)) as? NSDictionary)
        let expected: NSDictionary = [
            "type": "locate", "id": id.uuidString.lowercased(), "client_id": "agent-key", "agent_name": "Claude \"2\"",
            "expires_ms": 1_796_000_000_000,
            "requester": ["user_id": requester.uuidString.lowercased(), "name": "Bob", "email": "bob@example.com"],
        ]
        #expect(written == expected)
        let own = LocateMessage(id: id, clientID: "c", expiresMs: 1, requester: nil)
        #expect((try JSONSerialization.jsonObject(with: Data(own.phoneJSON.utf8)) as? [String: Any])?["requester"] is NSNull)
        var withKey = try #require(JSONValue.parse(ping.phoneJSON))
        if case .object(var members) = withKey {
            members["reply_key"] = .string(Data(repeating: 7, count: 32).base64EncodedString())
            withKey = .object(members)
        }
        #expect(LocateMessage(json: withKey) == ping)
    }

    /// Whether our value and Foundation's mean the same.
    static func same(_ ours: JSONValue, _ theirs: Any) -> Bool {
        switch ours {
        case .null: return theirs is NSNull
        case .bool(let value): return (theirs as? NSNumber).map { String(cString: $0.objCType) == "c" && $0.boolValue == value } ?? false
        case .number(let value): return (theirs as? NSNumber).map { String(cString: $0.objCType) != "c" && $0.doubleValue == value } ?? false
        case .string(let value): return theirs as? String == value
        case .array(let values):
            guard let array = theirs as? [Any], array.count == values.count else { return false }
            return zip(values, array).allSatisfy { same($0, $1) }
        case .object(let members):
            guard let object = theirs as? [String: Any], object.count == members.count else { return false }
            return members.allSatisfy { key, value in object[key].map { same(value, $0) } ?? false }
        }
    }

    /// UUIDs as text agree with Foundation's, and only the 8-4-4-4-12 form parses.
    @Test func uuidsAsText() {
        for _ in 0..<1_000 {
            let id = UUID()
            #expect(UUIDText.lowercase(id) == id.uuidString.lowercased())
            #expect(UUIDText.parse(id.uuidString) == id && UUIDText.parse(id.uuidString.lowercased()) == id)
        }
        for text in ["", "6f1c3d6e2b0a4c1e9d7a0b9e1f2a3c4d", "{6f1c3d6e-2b0a-4c1e-9d7a-0b9e1f2a3c4d}",
                     "6f1c3d6e-2b0a-4c1e-9d7a-0b9e1f2a3c4g", "6f1c3d6e-2b0a-4c1e-9d7a0-b9e1f2a3c4d",
                     "6f1c3d6e-2b0a-4c1e-9d7a-0b9e1f2a3c4d ", "6f1c3d6e-2b0a-4c1e-9d7a-0b9e1f2a3c4é"] {
            #expect(UUIDText.parse(text) == nil, "\(text)")
            #expect(UUIDText.parse(text) == UUID(uuidString: text))
        }
    }
}
