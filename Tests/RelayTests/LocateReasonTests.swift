import Foundation
import HTTPServer
import JSON
@testable import Relay
@testable import RelayCore
import Testing

/// The agent's reason (docs/protocol.md, "Consent"): cleaned, bounded, carried in the ping and
/// the push text, refused with a clear text when too long.
@Suite struct LocateReasonTests {
    @Test func cleaningTurnsControlsIntoSpacesAndRemovesBidiControls() {
        #expect(LocateReason.clean("  To pick\tyou\r\nup  at   the station ") == "To pick you up at the station")
        #expect(LocateReason.clean("Bring\u{202E}the\u{2066} keys\u{2069}") == "Bringthe keys")
        #expect(LocateReason.clean("zero\u{200B}width\u{FEFF} and bell\u{07}!") == "zerowidth and bell !")
        #expect(LocateReason.clean("line\u{2028}separator\u{0085}next") == "line separator next")
        #expect(LocateReason.clean("no\u{00A0}break\u{3000}ideographic") == "no break ideographic")
        #expect(LocateReason.clean("<img src=x onerror=alert(1)>") == "<img src=x onerror=alert(1)>", "markup is text, kept as is")
        #expect(LocateReason.clean("\n\t \u{202A}") == "")
    }

    @Test func atMost120ScalarsAfterCleaning() {
        #expect(LocateReason.check(String(repeating: "x", count: 120)) == .reason(String(repeating: "x", count: 120)))
        #expect(LocateReason.check(String(repeating: "x", count: 121)) == .tooLong)
        #expect(LocateReason.check(String(repeating: "🚉", count: 120)) == .reason(String(repeating: "🚉", count: 120)),
                "an emoji is one scalar")
        #expect(LocateReason.check(String(repeating: "x", count: 100) + String(repeating: " \n", count: 500) + "y")
                == .reason(String(repeating: "x", count: 100) + " y"), "cleaning may shorten it below the limit")
        #expect(LocateReason.check(String(repeating: "a", count: 10_000)) == .tooLong)
        #expect(LocateReason.check("   ") == .reason(nil))
        #expect(LocateReason.check(nil) == .reason(nil))
        #expect(LocateReason.tooLongText.contains("reason") && LocateReason.tooLongText.contains("120"))
    }

    @Test func theRouteTakesTheQueryOrAJSONBody() {
        func request(_ target: String, body: String = "") -> HTTPRequest {
            var parser = HTTPRequestParser()
            parser.append(Array("POST \(target) HTTP/1.1\r\nHost: x\r\nContent-Length: \(body.utf8.count)\r\n\r\n\(body)".utf8))
            guard case .request(let request)? = parser.next() else { fatalError("the test's request does not parse") }
            return request
        }
        func reason(_ request: HTTPRequest) -> String?? {
            if case .success(let text) = AgentRoutes.reasonArgument(request) { return .some(text) }
            return .none
        }
        #expect(reason(request("/v1/locate?reason=To%20meet%0Ayou")) == .some("To meet you"))
        #expect(reason(request("/v1/locate", body: #"{"reason": "Dinner\tis ready"}"#)) == .some("Dinner is ready"))
        #expect(reason(request("/v1/locate", body: #"{"reason": null}"#)) == .some(nil))
        #expect(reason(request("/v1/locate", body: " \n")) == .some(nil))
        #expect(reason(request("/v1/locate")) == .some(nil))
        #expect(reason(request("/v1/locate?reason=query", body: #"{"reason": "body"}"#)) == .some("query"))
        for bad in [#"{"reason": 5}"#, #"{"why": "x"}"#, "[]", "not json", #""reason""#] {
            guard case .failure(let refusal) = AgentRoutes.reasonArgument(request("/v1/locate", body: bad)) else {
                Issue.record("\(bad) was taken")
                continue
            }
            #expect(refusal.text == AgentRoutes.ReasonRefusal.body.text)
        }
        let long = String(repeating: "x", count: 121)
        guard case .failure(let refusal) = AgentRoutes.reasonArgument(request("/v1/locate?reason=\(long)")) else {
            Issue.record("a long reason was taken")
            return
        }
        #expect(refusal.text == LocateReason.tooLongText)
    }

    @Test func thePingCarriesTheReasonOnlyWhenGiven() throws {
        let id = UUID()
        let with = LocateMessage(id: id, clientID: "c", agentName: "Claude", expiresMs: 1, requester: nil, reason: "To meet you")
        let without = LocateMessage(id: id, clientID: "c", agentName: "Claude", expiresMs: 1, requester: nil)
        #expect(JSONValue.parse(bytes: Array(with.phoneJSON.utf8))?["reason"] == .string("To meet you"))
        #expect(JSONValue.parse(bytes: Array(without.phoneJSON.utf8))?["reason"] == nil)
        // From the database's notification: cleaned again; a reason that is not a string refuses the ping.
        let json: JSONValue = ["id": .string(id.uuidString), "client_id": "c", "expires_ms": 1, "reason": "Hi\u{202E}\nthere"]
        #expect(LocateMessage(json: json)?.reason == "Hi there")
        var bad = json
        if case .object(var object) = bad { object["reason"] = 3; bad = .object(object) }
        #expect(LocateMessage(json: bad) == nil)
    }

    @Test func thePushTextQuotesTheAgentAfterItsName() throws {
        let payload = PushPayload(kind: .alert, requestID: UUID(), clientID: "c", agentName: "Claude", requester: nil,
                                  expiresMs: 1, reason: "To pick you up\nat 6")
        #expect(payload.body() == "Your agent Claude wants to know your location: To pick you up at 6")
        let checking = PushPayload(kind: .checking, requestID: UUID(), clientID: "c", agentName: "Claude", requester: nil,
                                   expiresMs: 1, reason: "Commute")
        #expect(checking.body() == "Claude is checking your location: Commute")
        let web = try #require(JSONValue.parse(bytes: payload.webPush()))
        #expect(web["reason"] == .string("To pick you up at 6"))
        #expect(web["body"] == .string(payload.body()))
        let apns = try #require(JSONValue.parse(bytes: payload.apns()))
        #expect(apns["aps"]?["alert"]?["body"] == .string(payload.body()))
        let none = PushPayload(kind: .alert, requestID: UUID(), clientID: "c", agentName: "Claude", requester: nil, expiresMs: 1)
        #expect(JSONValue.parse(bytes: none.webPush())?["reason"] == nil, "no key without a reason (the payload without one, unchanged)")
        let long = PushPayload(kind: .alert, requestID: UUID(), clientID: "c", agentName: String(repeating: "🦊", count: 200),
                               requester: nil, expiresMs: 1, reason: String(repeating: "👩‍🚀", count: 120))
        #expect(long.apns().count <= 4096 && long.webPush().count <= 3993)
    }
}
