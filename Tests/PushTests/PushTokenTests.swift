import Crypto
import Foundation
@testable import Push
import Testing

/// APNs provider tokens and VAPID tokens: claims, reuse, renewal rules.
@Suite struct PushTokenTests {
    /// The provider token carries kid and iss, an integer iat, and verifies with the key.
    @Test func providerTokenClaims() throws {
        let key = try P256Key.generate(), clock = TestClock()
        let tokens = APNsProviderToken(keyID: "KEY1234567", teamID: "TEAM123456", key: key, clock: clock.function)
        let minted = try tokens.current()
        let jwt = try DecodedJWT(minted.token, publicPoint: key.publicPoint)
        #expect(jwt.header["alg"] as? String == "ES256")
        #expect(jwt.header["kid"] as? String == "KEY1234567")
        #expect(jwt.claims["iss"] as? String == "TEAM123456")
        #expect(jwt.claims["iat"] as? Int == Int(clock.date.timeIntervalSince1970))
        #expect(jwt.claims.count == 2)
    }

    /// Reused until 50 minutes old, then renewed; the generation counts renewals.
    @Test func providerTokenIsReusedThenRefreshed() throws {
        let clock = TestClock()
        let tokens = APNsProviderToken(keyID: "K", teamID: "T", key: try P256Key.generate(), clock: clock.function)
        let first = try tokens.current()
        clock.advance(2999)
        #expect(try tokens.current() == first)
        clock.advance(1)
        let second = try tokens.current()
        #expect(second != first)
        #expect(second.generation == first.generation + 1)
    }

    /// ExpiredProviderToken: never a new token within 20 minutes (clock skew), and many
    /// failures of one generation renew once.
    @Test func expiredProviderTokenRenewsOncePerGeneration() throws {
        let clock = TestClock()
        let tokens = APNsProviderToken(keyID: "K", teamID: "T", key: try P256Key.generate(), clock: clock.function)
        let first = try tokens.current()
        clock.advance(1199)
        #expect(try tokens.expired(generation: first.generation) == .tooSoon)
        #expect(try tokens.current() == first)
        clock.advance(1)
        guard case .renewed(let second) = try tokens.expired(generation: first.generation) else {
            Issue.record("a 20-minute-old token is renewed")
            return
        }
        #expect(second.generation == first.generation + 1)
        #expect(try tokens.expired(generation: first.generation) == .alreadyRenewed(second))
        #expect(try tokens.current() == second)
    }

    /// VAPID: aud is the endpoint's origin, exp 12 h ahead (≤ 24 h), sub as configured;
    /// cached per origin and renewed when less than an hour remains.
    @Test func vapidClaimsAndCache() throws {
        let key = try P256Key.generate(), clock = TestClock()
        let vapid = try VAPIDToken(key: key, subject: "mailto:ops@whereabot.example", clock: clock.function)
        let header = try vapid.authorization(for: "https://FCM.googleapis.com:443/fcm/send/abc?x=1")
        #expect(header.hasPrefix("vapid t="))
        #expect(header.hasSuffix(", k=\(Base64URL.encode(key.publicPoint))"))
        let token = String(header.dropFirst(8).prefix { $0 != "," })
        let jwt = try DecodedJWT(token, publicPoint: key.publicPoint)
        #expect(jwt.header["typ"] as? String == "JWT")
        #expect(jwt.header["alg"] as? String == "ES256")
        #expect(jwt.claims["aud"] as? String == "https://fcm.googleapis.com:443")
        #expect(jwt.claims["sub"] as? String == "mailto:ops@whereabot.example")
        let exp = try #require(jwt.claims["exp"] as? Int)
        #expect(exp - Int(clock.date.timeIntervalSince1970) == 12 * 3600)
        #expect(exp - Int(clock.date.timeIntervalSince1970) <= 24 * 3600)
        clock.advance(10 * 3600)
        #expect(try vapid.authorization(for: "https://fcm.googleapis.com:443/other") == header)
        clock.advance(1 * 3600 + 1)
        #expect(try vapid.authorization(for: "https://fcm.googleapis.com:443/other") != header)
        #expect(try vapid.token(audience: "https://a.example") != vapid.token(audience: "https://b.example"))
    }

    /// VAPID subjects push services accept; endpoints that are not https have no origin.
    @Test func vapidSubjectsAndOrigins() throws {
        for good in ["mailto:ops@whereabot.example", "https://whereabot.example/contact"] {
            #expect(VAPIDToken.isValidSubject(good))
        }
        for bad in ["mailto:x@localhost", "ops@whereabot.example", "http://whereabot.example", "mailto:", "mailto:a b@c.d", ""] {
            #expect(!VAPIDToken.isValidSubject(bad), "\(bad)")
        }
        #expect(throws: PushConfigurationError.badSubject) { try VAPIDToken(key: P256Key.generate(), subject: "mailto:x@localhost") }
        #expect(VAPIDToken.origin(of: "http://push.example/x") == nil)
        #expect(VAPIDToken.origin(of: "https://user:pw@push.example/x") == nil)
        #expect(VAPIDToken.origin(of: "https://127.0.0.1:8443/sub/1") == "https://127.0.0.1:8443")
    }

    /// The per-origin cache never holds more than `maximumOrigins` tokens.
    @Test func vapidCacheIsBounded() throws {
        let vapid = try VAPIDToken(key: P256Key.generate(), subject: "mailto:ops@whereabot.example")
        for index in 0..<VAPIDToken.maximumOrigins { _ = try vapid.token(audience: "https://push\(index).example") }
        #expect(vapid.cachedOrigins == VAPIDToken.maximumOrigins)
        _ = try vapid.token(audience: "https://push0.example")
        #expect(vapid.cachedOrigins == VAPIDToken.maximumOrigins, "a cached origin does not clear the cache")
        _ = try vapid.token(audience: "https://one-more.example")
        #expect(vapid.cachedOrigins == 1, "a new origin past the bound starts over")
    }
}
