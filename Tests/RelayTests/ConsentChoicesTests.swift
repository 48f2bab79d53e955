import Foundation
import JSON
@testable import Relay
@testable import RelayCore
import Testing

/// "Share approximate" and "Allow for 1 hour" (docs/protocol.md, "Consent") as the relay
/// reads them from a
/// phone and writes them for the agent.
@Suite struct ConsentChoicesTests {
    let id = UUID()

    func answer(_ fields: String) -> PhoneMessage? {
        PhoneMessage.parse(#"{"type":"location","id":"\#(id)","latitude":52.5125,"longitude":13.4125,"timestamp_ms":1796000000000,\#(fields)}"#)
    }

    @Test func anApproximateAnswerNeedsAtLeastThreeKilometres() {
        #expect(answer(#""accuracy_m":3000,"precision":"approximate""#)
                == .answer(id: id, .location(latitude: 52.5125, longitude: 13.4125, accuracyM: 3000, timestampMs: 1_796_000_000_000,
                                             altitudeM: nil, speedMps: nil, headingDeg: nil, precision: .approximate)))
        #expect(answer(#""accuracy_m":2999.9,"precision":"approximate""#) == .answer(id: id, .unavailable(.noFix)),
                "sharper than it claims: the agent gets the no-fix answer")
        #expect(answer(#""accuracy_m":"far","precision":"approximate""#) == .answer(id: id, .unavailable(.error)),
                "an accuracy that is no number is a bad answer, as without precision")
        #expect(answer(#""accuracy_m":5,"precision":"blurry""#) == .answer(id: id, .unavailable(.error)))
        #expect(answer(#""accuracy_m":5,"precision":null"#)
                == .answer(id: id, .location(latitude: 52.5125, longitude: 13.4125, accuracyM: 5, timestampMs: 1_796_000_000_000,
                                             altitudeM: nil, speedMps: nil, headingDeg: nil, precision: .precise)))
    }

    @Test func theAgentAlwaysLearnsThePrecision() throws {
        let approximate = LocationFix(latitude: 52.5125, longitude: 13.4125, accuracyM: 3000, timestampMs: 1, deviceName: "Pixel",
                                      platform: "android", precision: .approximate)
        let precise = LocationFix(latitude: 52.52, longitude: 13.405, accuracyM: 9, timestampMs: 1, deviceName: "Pixel", platform: "android")
        #expect(JSONValue.parse(approximate.agentJSON(now: Date(), person: nil))?["precision"] == "approximate")
        #expect(JSONValue.parse(precise.agentJSON(now: Date(), person: nil))?["precision"] == "precise")
        #expect(LocationFix(sealedJSON: approximate.sealedJSON) == approximate, "sealed and opened, it stays approximate")
        #expect(LocationFix(sealedJSON: precise.sealedJSON) == precise)
        #expect(approximate.isPlausible && precise.isPlausible)
        let sharp = LocationFix(latitude: 1, longitude: 1, accuracyM: 10, timestampMs: 1, deviceName: "", platform: "web",
                                precision: .approximate)
        #expect(!sharp.isPlausible, "a sealed approximate fix sharper than 3 km is no fix")
    }

    @Test func theRelayMakesAnApproximateFixApproximate() {
        let claimed = LocationFix(latitude: 52.520008, longitude: 13.404954, accuracyM: 3000, timestampMs: 1, altitudeM: 34.5,
                                  speedMps: 1.2, headingDeg: 270, deviceName: "Pixel", platform: "android", precision: .approximate)
        #expect((claimed.latitude, claimed.longitude) == (52.5125, 13.4125), "the centre of the cell, not the phone's fix")
        #expect(claimed.altitudeM == nil && claimed.speedMps == nil && claimed.headingDeg == nil, "nothing finer than the cell")
        #expect(LocationFix(sealedJSON: claimed.sealedJSON) == claimed, "snapping twice changes nothing")
        #expect(LocationFix.cellCentre(90, limit: 90) == 89.9875 && LocationFix.cellCentre(-90, limit: 90) == -89.9875)
        #expect(LocationFix.cellCentre(180, limit: 180) == 179.9875 && LocationFix.cellCentre(-180, limit: 180) == -179.9875)
        #expect(LocationFix.cellCentre(-0.01, limit: 90) == -0.0125 && LocationFix.cellCentre(0, limit: 90) == 0.0125)
        #expect(LocationFix.cellCentre(.nan, limit: 90).isNaN, "left for isPlausible to refuse")
        let precise = LocationFix(latitude: 52.520008, longitude: 13.404954, accuracyM: 9, timestampMs: 1, altitudeM: 34.5,
                                  deviceName: "Pixel", platform: "android")
        #expect((precise.latitude, precise.altitudeM) == (52.520008, 34.5), "a precise fix is the phone's own")
    }

    @Test func anAlwaysAllowCanBeApproximateAndForAWhile() {
        func parse(_ fields: String) -> PhoneAccountRequest?? {
            PhoneAccountRequest.parse(JSONValue.parse(#"{"type":"always_allow","client_id":"claude",\#(fields)}"#)!)
        }
        #expect(parse(#""precision":"approximate","expires_in_s":3600"#)
                == .some(.alwaysAllow(clientID: "claude", clientName: "", requesterID: nil, precision: .approximate, expiresInS: 3600)))
        #expect(parse(#""client_name":"Claude""#)
                == .some(.alwaysAllow(clientID: "claude", clientName: "Claude", requesterID: nil, precision: .precise, expiresInS: nil)))
        for bad in [#""precision":"blurry""#, #""precision":3"#, #""expires_in_s":0"#, #""expires_in_s":86401"#,
                    #""expires_in_s":1e300"#, #""expires_in_s":-5"#, #""expires_in_s":1.5"#, #""expires_in_s":"3600""#] {
            #expect(parse(bad) == .some(nil), "\(bad) is malformed")
        }
    }
}
