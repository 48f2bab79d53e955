import Foundation
import HTTPServer
import JSON
@testable import Relay
@testable import RelayCore
import Testing

/// One failure renders the same status, text and retry delay on both transports.
@Suite struct RelayErrorTests {
    @Test func httpCarriesStatusTextAndRetryAfter() {
        let response = RelayError.databaseUnreachable.response
        #expect(response.status == 503)
        #expect(String(decoding: response.body, as: UTF8.self) == "The relay cannot reach its database right now. Retry in a few seconds.")
        #expect(response.headers["Retry-After"] == "5")
        #expect(response.headers["Content-Type"]?.hasPrefix("text/plain") == true)
        #expect(RelayError.draining.response.headers["Retry-After"] == "2")
        #expect(RelayError.rateLimited(retryAfter: 37).response.headers["Retry-After"] == "37")
        #expect(RelayError.tooManyPolls(retryAfter: 2).response.status == 429)
        #expect(RelayError.forbidden("Origin not allowed.").response.headers["Retry-After"] == nil, "only when retrying helps")
    }

    @Test func extraHeadersJoinRetryAfter() {
        let response = RelayError.locate(.badCredential, now: Date()).response(headers: ["WWW-Authenticate": "Bearer"])
        #expect(response.status == 401 && response.headers["WWW-Authenticate"] == "Bearer")
        #expect(String(decoding: response.body, as: UTF8.self) == AgentFailure.badCredential.agentText)
    }

    /// The MCP tool result carries the same text as the HTTP body, marked as an error.
    @Test func mcpCarriesTheSameText() {
        for error in [RelayError.databaseUnreachable, .locate(.tooManyWaiting, now: Date()), .gone(ResumeText.cancelled)] {
            let result = JSONValue.object(error.toolResult)
            #expect(result["isError"] == .bool(true))
            guard case .array(let content)? = result["content"] else { Issue.record("no content"); continue }
            #expect(content.count == 1 && content[0]["text"]?.string == error.text)
            #expect(String(decoding: error.response.body, as: UTF8.self) == error.text)
        }
    }

    /// Every locate failure keeps its status (docs/protocol.md, "Answers and agent texts")
    /// through the error.
    @Test func locateFailuresKeepTheirStatus() {
        let failures: [AgentFailure] = [.badCredential, .declined, .noAnswer, .permissionOff, .noFix, .tooManyWaiting,
                                        .notConnected(email: nil), .phoneSilent, .nobodyNamed("Ada"), .personDeclined("Ada")]
        for failure in failures {
            #expect(RelayError.locate(failure, now: Date()).status == failure.status)
            #expect(RelayError.locate(failure, now: Date()).code == .locate)
        }
    }

    @Test func descriptionsNameTheCodeAndText() {
        #expect(RelayError.draining.description == "draining (503): This relay instance is restarting. Retry in a few seconds.")
    }
}
