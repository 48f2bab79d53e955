import Crypto
import Foundation
import JSON
@testable import Relay
@testable import RelayCore
import Testing

/// Durable requests' parts without sockets: the token and what derives from it, the
/// parameters agents send, the poll limit, the task shapes.
@Suite struct DurableRequestTests {
    @Test func aTokenRoundTripsAndDerivesTheSameRowAndReplyKey() throws {
        let token = try RequestToken()
        #expect(token.text.hasPrefix("wbr_") && token.text.count == RequestToken.length)
        let parsed = try #require(RequestToken(parsing: token.text))
        #expect(parsed == token && parsed.id == token.id)
        #expect(try parsed.replyKey().publicKey == token.replyKey().publicKey)
        #expect(try RequestToken().id != token.id)
        // The log name and description never carry the secret.
        #expect(!token.description.contains(token.text.dropFirst(4)) && token.tag.count == 12)
        #expect(!token.id.uuidString.lowercased().contains(token.text.dropFirst(4).lowercased()))
    }

    @Test(arguments: ["", "wbr_", "wbr_short", "WBR_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA", "wbr_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=",
                      "wbr_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA+", "wbr_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA", " wbr_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA",
                      "wbr_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA\u{e9}"])
    func anythingButATokenIsRefused(text: String) {
        #expect(RequestToken(parsing: text) == nil)
    }

    @Test func aFixSealedToTheTokensKeyOpensOnlyWithIt() throws {
        let token = try RequestToken()
        let sealed = try Sealing.seal(Array("fix".utf8), to: token.replyKey().publicKey, requestID: token.id)
        let same = try #require(RequestToken(parsing: token.text))
        #expect(try same.replyKey().open(sealed, requestID: token.id) == Array("fix".utf8))
        #expect(throws: CryptoError.cannotOpen) { try RequestToken().replyKey().open(sealed, requestID: token.id) }
    }

    @Test func aWrappedSecretUnwrapsOnlyUnderItsKeyAndForItsRow() throws {
        let token = try RequestToken()
        let key = [UInt8](repeating: 7, count: 32)
        let wrapped = try token.wrapped(under: key)
        #expect(RequestToken.unwrap(wrapped, under: key, id: token.id) == token)
        #expect(RequestToken.unwrap(wrapped, under: [UInt8](repeating: 8, count: 32), id: token.id) == nil)
        #expect(RequestToken.unwrap(wrapped, under: key, id: UUID()) == nil)
        #expect(RequestToken.unwrap(Array(wrapped.dropLast()), under: key, id: token.id) == nil)
        #expect(!wrapped.contains(subsequence: token.secret))
    }

    @Test func taskTTLsAreWholeMillisecondsInRange() {
        #expect(DurableParams.ttl(["ttl": 60_000]) == .success(60_000))
        #expect(DurableParams.ttl([:]) == .success(nil))
        #expect(DurableParams.ttl(["ttl": .null]) == .success(nil))
        for bad: JSONValue in [0, 999, 86_400_001, 1e12, 1.5, "60000", true, -5, .number(.nan), .number(.infinity), ["x": 1]] {
            #expect(DurableParams.ttl(["ttl": bad]) == .failure(.init(DurableParams.ttlText)), "\(bad)")
        }
        #expect(DurableParams.ttl("not an object") == .failure(.init("params.task must be an object.")))
    }

    @Test func cursorsRoundTripAndJunkIsRefused() {
        let id = UUID()
        let cursor = DurableParams.cursor(createdMicroseconds: 1_764_590_400_123_456, id: id)
        #expect(DurableParams.parseCursor(cursor)?.createdMicroseconds == 1_764_590_400_123_456)
        #expect(DurableParams.parseCursor(cursor)?.id == id)
        for bad in ["", "x", Base64URL.encode(Array("12.nope".utf8)), Base64URL.encode(Array("-1.\(id)".utf8)),
                    Base64URL.encode(Array("999999999999999999999.\(id)".utf8)), String(repeating: "A", count: 200)] {
            #expect(DurableParams.parseCursor(bad) == nil, "\(bad)")
        }
    }

    @Test func preferAndWaitSeconds() {
        for yes in ["respond-async", "Respond-Async", "wait=10, respond-async", " respond-async ;x=1", "respond-async=1"] {
            #expect(DurableParams.prefersAsync(yes), "\(yes)")
        }
        for no in [nil, "", "respond-asynchronously", "return=minimal", "wait=respond-async",
                   String(repeating: "respond-async,", count: 100)] as [String?] {
            #expect(!DurableParams.prefersAsync(no), "\(no ?? "nil")")
        }
        #expect(DurableParams.waitSeconds("0") == 0 && DurableParams.waitSeconds("60") == 60 && DurableParams.waitSeconds("07") == 7)
        for bad in ["", "61", "-1", "+1", "1.5", "100", "x", " 1"] { #expect(DurableParams.waitSeconds(bad) == nil, "\(bad)") }
    }

    @Test func pollsAreLimitedToTwoASecondPerRequestAndCredential() async throws {
        let clock = try ManualClock()
        let limiter = PollLimiter(clock: clock.relay)
        let token = try RequestToken(), other = try RequestToken()
        let agent = RelayDatabase.Binding(AgentIdentity(userID: UUID(), clientID: "c", keyID: nil, keyName: nil, email: nil))
        #expect(limiter.take(token, by: agent) == nil && limiter.take(token, by: agent) == nil)
        #expect(limiter.take(token, by: agent) == 1)
        #expect(limiter.take(other, by: agent) == nil)  // another request has its own budget
        await clock.advance(0.5)
        #expect(limiter.take(token, by: agent) == nil)  // at the advertised pace it never refuses
        #expect(limiter.take(token, by: agent) == 1)
    }

    @Test func taskStatusesFollowTheRequest() throws {
        let token = try RequestToken()
        func state(_ outcome: RelayStatus.Outcome?) -> RelayDatabase.DurableState {
            RelayDatabase.DurableState(id: token.id, createdMicroseconds: 0, owner: UUID(), outcome: outcome, reason: nil, delivered: true,
                                       createdAt: Date(timeIntervalSince1970: 100), expiresAt: Date(timeIntervalSince1970: 400),
                                       settledAt: outcome == nil ? nil : Date(timeIntervalSince1970: 200),
                                       keepUntil: Date(timeIntervalSince1970: 800), sealed: nil)
        }
        let working = MCPTask(token, state: state(nil), result: nil)
        #expect(working.status == "working" && !working.isTerminal && working.ttlMilliseconds == 700_000)
        #expect(working.legacy["ttl"] == 700_000 && working.modern["ttlMs"] == 700_000)
        #expect(working.legacy["pollInterval"] == 2_000 && working.modern["pollIntervalMs"] == 2_000)
        #expect(MCPTask(token, state: state(.abandoned), result: .abandoned).status == "cancelled")
        let declined = MCPTask(token, state: state(.denied), result: .failure(.declined))
        #expect(declined.status == "completed" && declined.statusMessage == AgentFailure.declined.agentText)
        #expect(declined.legacy["lastUpdatedAt"] == "1970-01-01T00:03:20.000Z")
    }
}

extension Array where Element == UInt8 {
    func contains(subsequence: [UInt8]) -> Bool {
        guard subsequence.count <= count else { return false }
        return (0...(count - subsequence.count)).contains { Array(self[$0..<($0 + subsequence.count)]) == subsequence }
    }
}
