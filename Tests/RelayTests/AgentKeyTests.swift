import Crypto
@testable import Relay
import Testing

/// Agent keys are signed (docs/security.md, "Under floods"): the relay tells a key the database
/// made from a forgery without asking the database.
@Suite struct AgentKeyTests {
    let secret = [UInt8](repeating: 7, count: 32)

    func signed(_ random: String, secret: [UInt8]) -> String {
        let mac = Digest.hmacSHA256(key: secret, Array(random.utf8)).prefix(16)
        return random + mac.map { byte in String(byte, radix: 16).count == 1 ? "0" + String(byte, radix: 16) : String(byte, radix: 16) }.joined()
    }

    @Test func aKeyTheDatabaseSignedIsSigned() {
        let key = signed("wb_0123456789abcdef0123456789abcdef", secret: secret)
        #expect(AgentKey.looksLikeKey(key) && AgentKey.isSigned(key, secret: secret))
    }

    @Test func forgeriesAndOldKeysAreNot() {
        let key = signed("wb_0123456789abcdef0123456789abcdef", secret: secret)
        var flipped = Array(key.utf8)
        flipped[40] = flipped[40] == UInt8(ascii: "0") ? UInt8(ascii: "1") : UInt8(ascii: "0")
        #expect(!AgentKey.isSigned(String(decoding: flipped, as: UTF8.self), secret: secret), "one digit changed")
        #expect(!AgentKey.isSigned(key, secret: [UInt8](repeating: 8, count: 32)), "another secret")
        #expect(!AgentKey.isSigned("wb_" + String(repeating: "ab", count: 32), secret: secret), "an unsigned (old) key")
        #expect(!AgentKey.isSigned("wb_short", secret: secret) && !AgentKey.isSigned(key, secret: []))
    }
}
