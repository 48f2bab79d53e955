import Foundation
@testable import Relay
@testable import RelayCore
import Testing

/// docs/openapi.yaml is built from the code: every agent failure's status and exact text
/// is in it, and the committed file is what the code builds.
@Suite struct OpenAPIDocumentTests {
    @Test func everyAgentFailureIsDocumented() {
        let yaml = OpenAPIDocument.yaml
        let failures: [AgentFailure] = [.badCredential, .declined, .noAnswer, .permissionOff, .noFix, .tooManyWaiting,
                                        .notConnected(email: "ada@example.com"), .phoneSilent, .nobodyNamed("Ada"),
                                        .personDeclined("Ada"),
                                        .quietHours(name: "Ada", until: Date(timeIntervalSince1970: 0), local: "07:00")]
        for failure in failures {
            #expect(yaml.contains("\"\(failure.status)\":"), "status \(failure.status)")
            #expect(yaml.contains("\"\(failure.agentText.replacingOccurrences(of: "\"", with: "\\\""))\""), "\(failure)")
        }
        for text in [PhoneRoutes.answerGoneText, AgentRoutes.timeoutText, RelayError.rateLimited(retryAfter: 0).text, RelayError.draining.text] {
            #expect(yaml.contains("\"\(text)\""), "\(text)")
        }
    }

    @Test func theCommittedFileIsWhatTheCodeBuilds() throws {
        let url = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
            .appendingPathComponent("../../docs/openapi.yaml").standardizedFileURL
        #expect(try String(contentsOf: url, encoding: .utf8) == OpenAPIDocument.yaml,
                "run .build/debug/whereabot openapi > docs/openapi.yaml")
    }

    @Test func yamlQuotesEverythingThatCouldChangeTheStructure() {
        let yaml = YAML.map([("a", .string("x: \"y\"\n- z")), ("/path", .list([.map([("k", .int(1))]), .bool(true)]))]).text
        #expect(yaml == "a: \"x: \\\"y\\\"\\n- z\"\n\"/path\":\n  - k: 1\n  - true\n")
    }
}
