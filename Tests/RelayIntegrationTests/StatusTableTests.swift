import Foundation
import HTTPServer
import Relay
@testable import RelayCore
import Testing
import TestSupport

/// Every row of the status table (docs/protocol.md, "Answers and agent texts"), over HTTP and
/// as MCP tool results, from a phone that answers as told through a running relay.
@Suite(.serialized) struct StatusTableTests {
    /// What the phone sends back for a ping (nil: stays silent).
    static let rows: [(answer: String?, status: Int, text: String)] = [
        (#"{"type":"denied","id":"ID","reason":"user"}"#, 403, AgentFailure.declined.agentText),
        (#"{"type":"denied","id":"ID","reason":"no_answer"}"#, 408, AgentFailure.noAnswer.agentText),
        (#"{"type":"unavailable","id":"ID","reason":"permission"}"#, 424, AgentFailure.permissionOff.agentText),
        (#"{"type":"unavailable","id":"ID","reason":"no_fix"}"#, 424, AgentFailure.noFix.agentText),
        (#"{"type":"location","id":"ID","latitude":120,"longitude":0,"accuracy_m":5,"timestamp_ms":1}"#, 424, AgentFailure.noFix.agentText),
        (nil, 504, AgentFailure.phoneSilent.agentText),
    ]

    func mcpCall(_ harness: RelayHarness, _ authorization: String) async throws -> (isError: Bool, text: String) {
        let body = #"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"get_phone_location","arguments":{"timeout_secs":1}}}"#
        let (status, text) = try await harness.request("POST", "/mcp", authorization: authorization, body: body)
        #expect(status == 200)
        let object = try #require(try JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any])
        let result = try #require(object["result"] as? [String: Any])
        let content = try #require((result["content"] as? [[String: Any]])?.first?["text"] as? String)
        return (result["isError"] as? Bool ?? false, content)
    }

    @Test func everyPhoneOutcomeOverHTTPAndMCP() async throws {
        let admin = try await TestDatabase.admin()
        defer { Task { await admin.close() } }
        let harness = try await RelayHarness.start()
        for row in Self.rows {
            let ada = try await TestDatabase.makeUser(admin)
            let phone = try await harness.phone(RelayHarness.token(user: ada.user, session: ada.session, email: ada.email))
            let answering = Task {
                while let ping = await nextMessage(phone, type: "locate", within: 30), let id = ping["id"] as? String {
                    if let answer = row.answer { phone.send(answer.replacingOccurrences(of: "ID", with: id)) }
                }
            }
            let agent = "Bearer " + RelayHarness.token(user: ada.user, session: ada.session, email: ada.email, clientID: "c")
            let (status, text) = try await harness.request("POST", "/v1/locate?timeout_secs=1", authorization: agent)
            #expect(status == row.status && text == row.text, "HTTP for \(row.answer ?? "silence")")
            let tool = try await mcpCall(harness, agent)
            #expect(tool.isError && tool.text == row.text, "MCP for \(row.answer ?? "silence")")
            answering.cancel()
            phone.close()
        }
        await harness.stop()
    }

    /// 429 when the owner's requests are at the cap, and 503 without an email on the credential.
    @Test func capAndOfflineWithoutEmail() async throws {
        let admin = try await TestDatabase.admin()
        defer { Task { await admin.close() } }
        let harness = try await RelayHarness.start()
        let ada = try await TestDatabase.makeUser(admin)
        let phone = try await harness.phone(RelayHarness.token(user: ada.user, session: ada.session, email: ada.email))
        // One agent per request: the same agent's repeated ask joins the request it already
        // has waiting instead of opening another.
        func agent(_ n: Int) -> String {
            "Bearer " + RelayHarness.token(user: ada.user, session: ada.session, email: ada.email, clientID: "c\(n)")
        }
        // They wait until the phone declines them below, not for a deadline. A request
        // waits once its ping reached the phone (its row is in the database): the instance
        // counts a call as waiting before its open commits, and an extra request whose open
        // went in another batch call could then be opened first (on a loaded machine a 3 s
        // deadline could also pass before the extra request came).
        let waiting = (0..<InstanceDriver.defaultMaxWaiting).map { n in
            Task { try await harness.request("POST", "/v1/locate?timeout_secs=60", authorization: agent(n)) }
        }
        var pings: [String] = []
        for _ in waiting {
            let ping = try #require(await nextMessage(phone, type: "locate", within: 30))
            pings.append(ping["id"] as? String ?? "")
        }
        let (status, text) = try await harness.request("POST", "/v1/locate?timeout_secs=1", authorization: agent(98))
        #expect(status == 429 && text == AgentFailure.tooManyWaiting.agentText, "got \(status) \(text)")
        let tool = try await mcpCall(harness, agent(99))
        #expect(tool.isError && tool.text == AgentFailure.tooManyWaiting.agentText)
        for id in pings { phone.send(#"{"type":"denied","id":"\#(id)","reason":"user"}"#) }
        for task in waiting { #expect(try await task.value.status == 403) }
        phone.close()

        let bob = try await TestDatabase.makeUser(admin)
        var claims = TestToken.claims(user: bob.user, clientID: "c")
        claims["session_id"] = bob.session.uuidString.lowercased()
        claims["email"] = nil
        let noEmail = "Bearer " + TestToken.make(header: ["alg": "HS256"], claims: claims) { TestToken.hmac(Array(RelayHarness.secret.utf8), $0) }
        let offline = try await harness.request("POST", "/v1/locate?timeout_secs=1", authorization: noEmail)
        #expect(offline.status == 503 && offline.body == AgentFailure.notConnected(email: nil).agentText)
        #expect(try await mcpCall(harness, noEmail).text == AgentFailure.notConnected(email: nil).agentText)
        await harness.stop()
    }
}
