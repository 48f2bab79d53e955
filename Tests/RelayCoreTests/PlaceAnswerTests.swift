import Foundation
import JSON
@testable import RelayCore
import Testing

/// Places (docs/protocol.md, "Places") as the relay reads a phone's place answer and writes it
/// for the agent: the name only, cleaned and at most 40 characters, never with a position.
@Suite struct PlaceAnswerTests {
    let id = UUID()

    func answer(_ fields: String) -> PhoneMessage? {
        PhoneMessage.parse(#"{"type":"location","id":"\#(id)","precision":"place","timestamp_ms":1796000000000\#(fields)}"#)
    }

    @Test func aPlaceAnswerIsTheCleanedNameAndNoPosition() {
        #expect(answer(#","place":"Home""#) == .answer(id: id, .place(name: "Home", timestampMs: 1_796_000_000_000)))
        #expect(answer(#","place":"  \u202eemoH\u200b <b>x</b> ""#)
                == .answer(id: id, .place(name: "emoH <b>x</b>", timestampMs: 1_796_000_000_000)),
                "controls and bidi overrides go; markup is only text to the agent")
        #expect(answer(#","place":"\#(String(repeating: "é", count: 40))""#)
                == .answer(id: id, .place(name: String(repeating: "é", count: 40), timestampMs: 1_796_000_000_000)))
    }

    @Test func aBadPlaceAnswerIsNoFix() {
        for bad in [#","place":"Home","latitude":52.5"#, #","place":"Home","longitude":13.4"#, #","place":"Home","accuracy_m":10"#,
                    #","place":"Home","altitude_m":1"#, #","place":"""#, #","place":"\u200b\u202e ""#,
                    #","place":"\#(String(repeating: "a", count: 41))""#, #","place":7"#, ""] {
            #expect(answer(bad) == .answer(id: id, .unavailable(.noFix)), "\(bad)")
        }
        #expect(PhoneMessage.parse(#"{"type":"location","id":"\#(id)","precision":"place","place":"Home"}"#)
                == .answer(id: id, .unavailable(.noFix)), "no capture time")
    }

    @Test func theAgentGetsThePlaceAndNothingElse() throws {
        let place = LocationFix(place: "Home", timestampMs: 1_796_000_000_000, deviceName: "Pixel", platform: "android")
        let json = try #require(JSONValue.parse(place.agentJSON(now: Date(timeIntervalSince1970: 1_796_000_010), person: nil)))
        #expect(json["place"] == "Home" && json["precision"] == "place" && json["age_s"] == 10)
        #expect(json["latitude"] == nil && json["longitude"] == nil && json["accuracy_m"] == nil)
        #expect(LocationFix(sealedJSON: place.sealedJSON) == place, "sealed and opened, it stays a place")
        #expect(!place.sealedJSON.contains("latitude"))
        #expect(place.isPlausible)
        #expect(!LocationFix(place: "", timestampMs: 1, deviceName: "", platform: "web").isPlausible)
        #expect(LocationFix(sealedJSON: #"{"place":"Home","precision":"place","timestamp_ms":1,"device_name":"P","platform":"ios","latitude":1}"#)
                == nil, "a sealed place with a position is refused")
    }
}
