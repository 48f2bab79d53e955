import Foundation
import JSON
@testable import Relay
@testable import RelayCore
import Testing

/// The hand-written JSON of the hot path: the writers produce what the Codable and
/// Foundation forms produced before (so instances of two versions agree). The parser's
/// own tests are JSONTests.
@Suite struct JSONCodecTests {
    /// The sealed fix written by hand decodes as the Codable form and back.
    @Test func sealedFixRoundTrips() throws {
        let fix = LocationFix(latitude: -33.8688, longitude: 151.2093, accuracyM: 5, timestampMs: 1_796_000_000_120,
                              altitudeM: -12.25, speedMps: nil, headingDeg: 359.5, deviceName: "Ada \"phone\"", platform: "ios")
        #expect(try JSONDecoder().decode(LocationFix.self, from: Data(fix.sealedJSON.utf8)) == fix)
        #expect(LocationFix(sealedJSON: fix.sealedJSON) == fix)
        #expect(LocationFix(sealedJSON: String(decoding: try JSONEncoder().encode(fix), as: UTF8.self)) == fix)
        #expect(LocationFix(sealedJSON: #"{"latitude":"1"}"#) == nil)
    }

    /// The ping is the phone's documented form (docs/protocol.md, "Messages") without the
    /// reply key, and reads
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
            "always_allow": NSNull(),
        ]
        #expect(written == expected)
        // The relay's decision travels with the ping and reads back; a malformed one is no ping.
        let allowed = LocateMessage(id: id, clientID: "c", expiresMs: 1, requester: nil, alwaysAllow: .approximate)
        #expect(JSONValue.parse(allowed.phoneJSON)?["always_allow"] == ["precision": "approximate"])
        #expect(LocateMessage(json: JSONValue.parse(allowed.phoneJSON)!) == allowed)
        #expect(LocateMessage(json: JSONValue.parse(#"{"id":"\#(id)","client_id":"c","expires_ms":1,"always_allow":{"precision":"sharp"}}"#)!) == nil)
        let own = LocateMessage(id: id, clientID: "c", expiresMs: 1, requester: nil)
        #expect((try JSONSerialization.jsonObject(with: Data(own.phoneJSON.utf8)) as? [String: Any])?["requester"] is NSNull)
        var withKey = try #require(JSONValue.parse(ping.phoneJSON))
        if case .object(var members) = withKey {
            members["reply_key"] = .string(Data(repeating: 7, count: 32).base64EncodedString())
            withKey = .object(members)
        }
        #expect(LocateMessage(json: withKey) == ping)
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
