import Foundation
@testable import Relay
@testable import RelayCore
import Synchronization
import TestSupport
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
        var limiter = TokenBuckets()
        for _ in 0..<20 {
            #expect(limiter.retryAfter("10.0.0.1", now: 100) == 0)
            limiter.record("10.0.0.1", now: 100)
        }
        #expect(limiter.retryAfter("10.0.0.1", now: 100) == 1)
        #expect(limiter.retryAfter("10.0.0.2", now: 100) == 0, "other addresses are not affected")
        #expect(limiter.retryAfter("10.0.0.1", now: 100.5) == 0, "one failure refilled after half a second")
    }

    /// Addresses of one /56, each in a /64 of its own, share the /56's budget (twice a /64's)
    /// instead of getting one budget each; another /48 keeps its own.
    @Test func failuresOfOneRoutedPrefixShareItsBudget() {
        var budget = FailureBudget()
        var allowed = 0
        for n in 0..<256 {
            let address = "2001:db8:5600:aa\(String(format: "%02x", n))::1"
            if budget.retryAfter(address, now: 100) == 0 { allowed += 1 }
            budget.record(address, now: 100)
        }
        #expect(allowed == 40, "the /56's burst, not 256 of a /64's")
        #expect(budget.retryAfter("2001:db8:7700::1", now: 100) == 0, "another /48 is not affected")
        #expect(budget.retryAfter("198.51.100.7", now: 100) == 0)
        for _ in 0..<20 { budget.record("198.51.100.7", now: 100) }
        #expect(budget.retryAfter("198.51.100.7", now: 100) == 1, "an IPv4 address keeps the budget of 20")
    }

    /// A socket may ask its account 10 times at once and an account 20 times over all its
    /// sockets; past either the request is refused with the wait and nothing is taken.
    @Test func settingsAreBudgetedPerSocketAndPerAccount() {
        var budget = SettingsBudget()
        let user = UUID(), sockets = (0..<4).map { _ in UUID() }
        for _ in 0..<10 { #expect(budget.take(connection: sockets[0], user: user, now: 100) == 0) }
        #expect(budget.take(connection: sockets[0], user: user, now: 100) == 1, "one socket's burst is 10")
        for _ in 0..<10 { #expect(budget.take(connection: sockets[1], user: user, now: 100) == 0) }
        #expect(budget.take(connection: sockets[2], user: user, now: 100) == 1, "the account's burst is 20 over its sockets")
        #expect(budget.take(connection: UUID(), user: UUID(), now: 100) == 0, "another account is not affected")
        #expect(budget.take(connection: sockets[2], user: user, now: 100.5) == 0, "the account gets 2 a second back")
        #expect(SettingsBudget.refusal(retryAfter: 3).contains(#""reason":"too_many","retry_after_s":3"#))
    }

    /// Both budgets stay bounded however many sockets, accounts and addresses come and go.
    @Test func theBudgetsAreBounded() {
        var settings = SettingsBudget(capacity: 100)
        var failures = FailureBudget(capacity: 100)
        for n in 0..<1_000 {
            _ = settings.take(connection: UUID(), user: UUID(), now: Double(n) / 1000)
            failures.record("2001:db8:\(String(n, radix: 16)):\(String(n % 7, radix: 16))::1", now: Double(n) / 1000)
        }
        #expect(settings.count <= 200, "100 sockets and 100 accounts at most")
        #expect(failures.count <= 300, "100 keys at each of the three prefix lengths at most")
    }

    /// The limiter tracks a bounded number of addresses, however many fail.
    @Test func theLimiterIsBounded() {
        var limiter = TokenBuckets(capacity: 100)
        for n in 0..<1_000 { limiter.record("addr-\(n)", now: Double(n) / 1000) }
        #expect(limiter.count <= 100)
    }

    /// Names lose controls, bidi overrides and zero-width characters, and are cut.
    @Test func displayTextIsCleaned() {
        #expect(DisplayText.clean(" Ma\u{202E}llo\u{200B}ry\n\u{0007} ", maximumLength: 80) == "Mallory")
        #expect(DisplayText.clean(String(repeating: "é", count: 100), maximumLength: 80).count == 80)
    }
}

/// The logger: a level filter, a bounded failure counter, no error details.
@Suite struct LoggerTests {
    /// Lines below the level are dropped; warnings are counted either way.
    @Test func levelsFilterAndWarningsCount() {
        let lines = Mutex<[String]>([])
        let logger = Logger(level: .error) { line in lines.withLock { $0.append(line) } }
        logger.info("quiet")
        logger.warning("heartbeat_failed")
        logger.error("boom", ["n": "1"])
        #expect(lines.withLock { $0.count } == 1)
        #expect(lines.withLock { $0.first?.contains(#""event":"boom""#) } == true)
        #expect(logger.failureCounts == ["heartbeat_failed": 1, "boom": 1])
    }

    /// However many distinct event names arrive, at most 256 are counted.
    @Test func theFailureCounterIsBounded() {
        let logger = Logger(level: .error) { _ in }
        for n in 0..<1_000 { logger.warning("event_\(n)") }
        #expect(logger.failureCounts.count == Logger.maximumCountedEvents)
    }

    /// An error that is not ours is named by its type, never by a description that may
    /// quote data.
    @Test func foreignErrorsAreNamedByType() {
        struct Leaky: Error, CustomStringConvertible { var description: String { "lat 47.3768866" } }
        #expect(Logger.code(of: Leaky()) == "Leaky")
    }
}
