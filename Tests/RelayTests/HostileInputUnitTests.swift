import Foundation
@testable import Relay
import Testing

/// The pure parts of the hostile-input rules: tokens must carry a session, failed
/// authentications are budgeted per address, and display text is cleaned.
@Suite struct HostileInputUnitTests {
    static let secret = "super-secret-jwt-token-with-at-least-32-characters"

    /// A token without `session_id` could never be revoked: refused (it passed before).
    @Test func aTokenWithoutSessionIsRefused() throws {
        var claims = TestToken.claims(clientID: "agent")
        claims["session_id"] = nil
        let token = TestToken.make(header: ["alg": "HS256", "typ": "JWT"], claims: claims) {
            TestToken.hmac(Array(Self.secret.utf8), $0)
        }
        #expect(throws: AuthError.noSession) { try JWTVerifier(hmacSecret: Self.secret).verify(token) }
    }

    /// 20 failures pass at once, the 21st is over budget, and the budget refills 2 a second.
    @Test func failuresAreBudgetedPerAddress() {
        var limiter = FailedAuthLimiter()
        for _ in 0..<20 {
            #expect(limiter.retryAfter("10.0.0.1", now: 100) == 0)
            limiter.recordFailure("10.0.0.1", now: 100)
        }
        #expect(limiter.retryAfter("10.0.0.1", now: 100) == 1)
        #expect(limiter.retryAfter("10.0.0.2", now: 100) == 0, "other addresses are not affected")
        #expect(limiter.retryAfter("10.0.0.1", now: 100.5) == 0, "one failure refilled after half a second")
    }

    /// The limiter tracks a bounded number of addresses, however many fail.
    @Test func theLimiterIsBounded() {
        var limiter = FailedAuthLimiter(capacity: 100)
        for n in 0..<1_000 { limiter.recordFailure("addr-\(n)", now: Double(n) / 1000) }
        #expect(limiter.count <= 100)
    }

    /// Names lose controls, bidi overrides and zero-width characters, and are cut.
    @Test func displayTextIsCleaned() {
        #expect(DisplayText.clean(" Ma\u{202E}llo\u{200B}ry\n\u{0007} ", maximumLength: 80) == "Mallory")
        #expect(DisplayText.clean(String(repeating: "é", count: 100), maximumLength: 80).count == 80)
    }
}
