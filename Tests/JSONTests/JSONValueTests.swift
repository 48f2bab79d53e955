import Foundation
import JSON
import Testing

/// The one JSON stack: the parser agrees with Foundation's on what is JSON and what it
/// means and refuses what RFC 8259 refuses; the writer gives what JSONSerialization gave
/// with sorted keys and unescaped slashes, so every payload reads as it did before.
@Suite struct JSONValueTests {
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
        // The edges of the four-digit years written in place, and the first year past them.
        #expect(JSONText.timestamp(milliseconds: -62_135_596_800_000) == "0001-01-01T00:00:00.000Z")
        #expect(JSONText.timestamp(milliseconds: 253_402_300_799_999) == "9999-12-31T23:59:59.999Z")
        #expect(JSONText.timestamp(milliseconds: 253_402_300_800_000) == "10000-01-01T00:00:00.000Z")
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

    /// The writer's text is JSONSerialization's (sorted keys, `/` unescaped) for the
    /// shapes we send, and parses back to the same value.
    @Test(arguments: [
        #"{"jsonrpc":"2.0","id":7,"result":{"content":[{"type":"text","text":"a/b \"q\" \n é 😀"}],"isError":false}}"#,
        #"{"a":[1,2.5,-3,1000000,true,false,null,{"b":"c"}],"x":"","z":{}}"#,
        #"[]"#, #""s""#, "0", "-12.5", "123456789012345", "0.1",
    ])
    func writesWhatFoundationWrote(text: String) throws {
        let value = try #require(JSONValue.parse(text))
        let foundation = try JSONSerialization.jsonObject(with: Data(text.utf8), options: [.fragmentsAllowed])
        let expected = String(decoding: try JSONSerialization.data(withJSONObject: foundation,
                                                                   options: [.sortedKeys, .withoutEscapingSlashes, .fragmentsAllowed]),
                              as: UTF8.self)
        #expect(value.text == expected)
        #expect(JSONValue.parse(value.text) == value)
    }

    /// Literals build the values they spell, and Swift values map as their JSON.
    @Test func literalsAndSwiftValues() {
        let name: String? = nil
        let value: JSONValue = ["s": "x", "i": 3, "d": 1.5, "b": true, "n": .null, "a": [1, "two"], "o": ["k": .string("v")],
                                "missing": JSONValue(name), "count": JSONValue(Int64(42))]
        #expect(value.text == #"{"a":[1,"two"],"b":true,"count":42,"d":1.5,"i":3,"missing":null,"n":null,"o":{"k":"v"},"s":"x"}"#)
        #expect(value["a"]?.array?.count == 2 && value["o"]?.object?["k"]?.string == "v")
        #expect(JSONValue(Double.nan).text == "null" && JSONValue(Double.infinity).text == "null")
    }

    /// An optional member: absent and null are "no value", a value of the wrong shape is
    /// malformed.
    @Test func optionalMembers() {
        let json: JSONValue = ["s": "x", "n": .null, "i": 3]
        #expect(json.optionalMember("s", \.string) == .some("x"))
        #expect(json.optionalMember("n", \.string) == .some(nil))
        #expect(json.optionalMember("missing", \.string) == .some(nil))
        #expect(json.optionalMember("i", \.string) == nil, "a number where a string belongs")
    }

    /// Bytes must be UTF-8: a body or JWT part with an invalid sequence is refused, not
    /// repaired into U+FFFD.
    @Test func bytesMustBeUTF8() {
        #expect(JSONValue.parse(bytes: Array(#"{"a":"é"}"#.utf8))?["a"]?.string == "é")
        #expect(JSONValue.parse(bytes: [0x22, 0xC3, 0x28, 0x22]) == nil)
        #expect(JSONValue.parse(bytes: [0x22, 0xFF, 0x22]) == nil)
        #expect(JSONValue.parse(bytes: [UInt8]()) == nil)
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

}

/// Objects are gathered member by member and made once they close: nested objects keep
/// their own members (the inner one closes first), a repeated key keeps its last value, a
/// large object keeps every member, and a parse that fails inside an object returns nil.
@Suite struct JSONObjectParsingTests {
    @Test func nestedRepeatedAndLargeObjects() throws {
        let nested = try #require(JSONValue.parse(#"{"a":1,"b":{"a":2,"c":{"a":3}},"d":[{"a":4},{}],"a":5}"#))
        #expect(nested == .object(["a": .number(5), "b": .object(["a": .number(2), "c": .object(["a": .number(3)])]),
                                   "d": .array([.object(["a": .number(4)]), .object([:])])]))
        let members = (0..<100).map { #""k\#($0)":\#($0)"# }.joined(separator: ",")
        let large = try #require(JSONValue.parse("{\(members)}"))
        guard case .object(let object) = large else { Issue.record("an object"); return }
        #expect(object.count == 100 && object["k0"] == .number(0) && object["k99"] == .number(99))
        #expect(JSONValue.parse(#"{"a":{"b":1,"c":}}"#) == nil)
        #expect(JSONValue.parse(#"[{"a":1},{"a":2,}]"#) == nil)
    }
}

/// The hand-written objects of a locate's path: an empty one, members in the order given
/// (strings escaped, null for nil, integers, a raw object), each closed as it is written.
@Suite struct JSONTextTests {
    @Test func objectsAreClosedAsTheyAreWritten() throws {
        #expect(JSONText().object == "{}")
        var inner = JSONText()
        inner.string("precision", "approximate")
        var json = JSONText()
        json.string("type", "locate")
        json.string("reason", nil)
        json.integer("expires_ms", 1_796_000_000_000)
        json.number("accuracy_m", 12.5)
        json.raw("always_allow", inner.object)
        json.string("name", "Ada \"A\" /x\n")
        let text = json.object
        #expect(text == #"{"type":"locate","reason":null,"expires_ms":1796000000000,"accuracy_m":12.5,"always_allow":{"precision":"approximate"},"name":"Ada \"A\" /x\n"}"#)
        #expect(JSONValue.parse(text)?["always_allow"]?["precision"]?.string == "approximate")
    }
}
