import Foundation
import Relay
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
