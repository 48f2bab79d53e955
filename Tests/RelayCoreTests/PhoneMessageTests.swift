import Foundation
@testable import RelayCore
import Testing

/// The phone's messages, including the lenient cases the protocol asks for.
@Suite struct PhoneMessageTests {
    let id = UUID()

    @Test func helloIsParsed() {
        let device = UUID()
        #expect(PhoneMessage.parse(#"{"type":"hello","app_version":"2.1","device_id":"\#(device)","device_name":"Ada's iPhone","platform":"ios"}"#)
                == .hello(deviceID: device, name: "Ada's iPhone", platform: "ios", appVersion: "2.1"))
    }

    @Test func locationIsParsedWithOptionalFields() {
        #expect(PhoneMessage.parse(#"{"type":"location","id":"\#(id)","latitude":52.5,"longitude":13.4,"accuracy_m":8,"timestamp_ms":1796000000000,"speed_mps":1.5}"#)
                == .answer(id: id, .location(latitude: 52.5, longitude: 13.4, accuracyM: 8, timestampMs: 1_796_000_000_000,
                                             altitudeM: nil, speedMps: 1.5, headingDeg: nil)))
    }

    @Test func impossibleCoordinatesCountAsUnavailableError() {
        for body in [#""latitude":91,"longitude":0"#, #""latitude":0,"longitude":-181"#, #""latitude":"x","longitude":0"#] {
            #expect(PhoneMessage.parse(#"{"type":"location","id":"\#(id)",\#(body),"accuracy_m":5,"timestamp_ms":1}"#)
                    == .answer(id: id, .unavailable(.error)))
        }
    }

    @Test func unknownReasonsFallBack() {
        #expect(PhoneMessage.parse(#"{"type":"denied","id":"\#(id)"}"#) == .answer(id: id, .denied(.user)))
        #expect(PhoneMessage.parse(#"{"type":"denied","id":"\#(id)","reason":"bored"}"#) == .answer(id: id, .denied(.user)))
        #expect(PhoneMessage.parse(#"{"type":"denied","id":"\#(id)","reason":"no_answer"}"#) == .answer(id: id, .denied(.noAnswer)))
        #expect(PhoneMessage.parse(#"{"type":"unavailable","id":"\#(id)","reason":"cosmic"}"#) == .answer(id: id, .unavailable(.error)))
        #expect(PhoneMessage.parse(#"{"type":"unavailable","id":"\#(id)","reason":"permission"}"#) == .answer(id: id, .unavailable(.permission)))
    }

    @Test func unknownAndMalformedMessages() {
        #expect(PhoneMessage.parse(#"{"type":"telemetry"}"#) == .unknown)
        #expect(PhoneMessage.parse(#"{"type":"location","id":"not-a-uuid"}"#) == .unknown)
        #expect(PhoneMessage.parse(#"{"type":"log","message":"hi"}"#) == .log)
        #expect(PhoneMessage.parse("not json") == nil)
        #expect(PhoneMessage.parse("[1,2]") == nil)
    }
}

/// Hostile numbers and names: every bad number is a bad answer, never a crash.
@Suite struct PhoneMessageHostileInputTests {
    let id = UUID()

    /// The reproducer of the crash: `timestamp_ms` of 1e19 killed the process with
    /// "Illegal instruction" (Int64 of an out-of-range Double); now it is unavailable (error).
    @Test func numbersOutOfRangeAreBadAnswers() {
        let bad = [#""timestamp_ms":1e19"#, #""timestamp_ms":-1e19"#, #""timestamp_ms":9.3e18"#, #""timestamp_ms":0"#,
                   #""timestamp_ms":"1""#, #""timestamp_ms":true"#, #""timestamp_ms":1e308"#,
                   #""timestamp_ms":1,"accuracy_m":-1"#, #""timestamp_ms":1,"heading_deg":361"#, #""timestamp_ms":1,"speed_mps":-2"#,
                   #""timestamp_ms":1,"altitude_m":1e300"#, #""timestamp_ms":1,"altitude_m":"high""#]
        for fields in bad {
            let text = #"{"type":"location","id":"\#(id)","latitude":1,"longitude":2,"accuracy_m":3,\#(fields)}"#
            #expect(PhoneMessage.parse(text) == .answer(id: id, .unavailable(.error)), "\(fields)")
        }
    }

    /// Whole and fractional numbers in range, 0 and 1 included, are fine (1 is not a boolean).
    @Test func numbersInRangePass() {
        let text = #"{"type":"location","id":"\#(id)","latitude":1,"longitude":0,"accuracy_m":0,"timestamp_ms":1796000000000.7,"altitude_m":null}"#
        #expect(PhoneMessage.parse(text) == .answer(id: id, .location(latitude: 1, longitude: 0, accuracyM: 0,
                                                                       timestampMs: 1_796_000_000_000, altitudeM: nil,
                                                                       speedMps: nil, headingDeg: nil)))
    }

    /// Device names lose control and format characters and are cut to 100 characters.
    @Test func deviceNamesAreCleaned() {
        let device = UUID()
        let name = "Ada\u{202E}\\n's\\u0000 iPhone" + String(repeating: "x", count: 200)
        guard case .hello(_, let cleaned, _, _)? = PhoneMessage.parse(#"{"type":"hello","device_id":"\#(device)","device_name":"\#(name)"}"#) else {
            Issue.record("not a hello")
            return
        }
        #expect(cleaned.hasPrefix("Ada's iPhone"))
        #expect(cleaned.count == 100)
    }

    /// A token message carries the new access token; an empty or oversized one is unknown.
    @Test func tokenMessages() {
        #expect(PhoneMessage.parse(#"{"type":"token","access_token":"a.b.c"}"#) == .token("a.b.c"))
        #expect(PhoneMessage.parse(#"{"type":"token","access_token":""}"#) == .unknown)
        #expect(PhoneMessage.parse(#"{"type":"token","access_token":"\#(String(repeating: "a", count: 9000))"}"#) == .unknown)
    }
}
