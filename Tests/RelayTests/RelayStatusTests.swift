import Foundation
import JSON
import PGBus
@testable import Relay
@testable import RelayCore
import Testing

/// The database's status words as enums: each word the enums know is one the current SQL
/// (supabase/schemas) writes, and a word they do not know is a malformed result, never a
/// silent default.
@Suite struct RelayStatusTests {
    /// Every quoted lowercase word (a SQL string literal) of the current SQL definitions.
    static let sqlWords: Set<String> = {
        let folder = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("../../supabase/schemas")
        let files = (try? FileManager.default.contentsOfDirectory(atPath: folder.path)) ?? []
        var words = Set<String>()
        let literal = /'([a-z_]+)'/
        for file in files where file.hasSuffix(".sql") {
            let text = (try? String(contentsOf: folder.appendingPathComponent(file), encoding: .utf8)) ?? ""
            for match in text.matches(of: literal) { words.insert(String(match.output.1)) }
        }
        return words
    }()

    static func words<Status: CaseIterable & RawRepresentable<String>>(_: Status.Type) -> [String] {
        Status.allCases.map(\.rawValue)
    }

    @Test func everyWordIsOneTheSQLWrites() {
        #expect(Self.sqlWords.count > 50, "supabase/schemas was read")
        let all = Self.words(RelayStatus.Hello.self) + Self.words(RelayStatus.Session.self) + Self.words(RelayStatus.Open.self)
            + Self.words(RelayStatus.Outcome.self) + Self.words(RelayStatus.Settle.self) + Self.words(RelayStatus.Finish.self)
            + Self.words(RelayStatus.MakeDurable.self) + Self.words(RelayStatus.Poll.self) + Self.words(RelayStatus.CancelDurable.self) + Self.words(RelayStatus.Claim.self)
        for word in all { #expect(Self.sqlWords.contains(word), "\(word) is in no SQL definition") }
    }

    @Test func unknownWordsAreMalformedResults() throws {
        #expect(try RelayDatabase.status("too_many", from: "open_request") as RelayStatus.Open == .tooMany)
        #expect(throws: PGError.self) { try RelayDatabase.status("closed", from: "open_request") as RelayStatus.Open }
        #expect(throws: PGError.self) { try RelayDatabase.status(nil, from: "open_request") as RelayStatus.Open }
        #expect(throws: PGError.self) { try RelayDatabase.status("OK", from: "device_hellos") as RelayStatus.Hello }
        #expect(try RelayDatabase.optionalStatus(nil, from: "finish") as RelayStatus.Outcome? == nil)
        #expect(throws: PGError.self) { try RelayDatabase.optionalStatus("lost", from: "finish") as RelayStatus.Outcome? }
        let json = try #require(JSONValue.parse(#"{"status":"already_settled"}"#))
        #expect(try RelayDatabase.status(json, "status", from: "finish") as RelayStatus.Finish == .alreadySettled)
    }

    /// A notification with an outcome this relay does not know is not an answer.
    @Test func answersWithUnknownOutcomesAreDropped() throws {
        let id = UUID().uuidString.lowercased()
        #expect(AnswerNotification(json: try #require(JSONValue.parse(#"{"id":"\#(id)","waiter":"i","outcome":"denied","reason":"user"}"#)))?.outcome == .denied)
        #expect(AnswerNotification(json: try #require(JSONValue.parse(#"{"id":"\#(id)","waiter":"i","outcome":"maybe"}"#))) == nil)
    }

    /// A push claim decodes as the function writes it, and a malformed one does not.
    @Test func pushClaimsDecode() throws {
        let owner = UUID().uuidString.lowercased()
        let claimed = try #require(JSONValue.parse("""
            {"status":"claimed","kind":"alert","apns":[{"token":"ab","environment":"production"}],
             "web":[{"endpoint":"https://push.example/x","p256dh":"k","auth":"a"}],"client_id":"c","client_name":null,
             "requester":null,"expires_ms":1796000000000,"owner":"\(owner)","limited":{"apns":1,"web":0}}
            """))
        let claim = try #require(PushClaim(json: claimed))
        #expect(claim.status == .claimed && claim.result == .claimed(.alert) && claim.apns?.first?.token == "ab")
        #expect(claim.web?.first?.subscription.endpoint == "https://push.example/x" && claim.limited == .init(apns: 1, web: 0))
        #expect(claim.owner?.uuidString.lowercased() == owner && claim.clientName == nil && claim.expiresMs == 1_796_000_000_000)
        #expect(PushClaim(json: ["status": "already"])?.result == .refused(.already))
        #expect(PushClaim(json: ["status": "nope"]) == nil)
        #expect(PushClaim(json: ["status": "claimed", "apns": [["token": 1]]]) == nil, "a target without its fields")
        #expect(PushClaim(json: ["status": "claimed", "owner": "not a uuid"]) == nil)
    }
}
