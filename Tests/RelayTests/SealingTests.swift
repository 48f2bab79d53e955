import Crypto
import Foundation
import Relay
import Testing

/// A location crosses Postgres only sealed to the waiter's per-request key.
@Suite struct SealingTests {
    let fix = Array(#"{"latitude":52.520008,"longitude":13.404954,"accuracy_m":12.5,"timestamp_ms":1796000000120,"altitude_m":34.1,"speed_mps":1.2,"heading_deg":270.0,"device":{"name":"Ada's iPhone","platform":"ios"}}"#.utf8)

    @Test func sealedAnswerOpensWithTheWaitersKeyOnly() throws {
        let waiter = try ReplyKey()
        let request = UUID()
        let sealed = try Sealing.seal(fix, to: waiter.publicKey, requestID: request)
        #expect(try waiter.open(sealed, requestID: request) == fix)
        #expect(!sealed.contains("52.52"))
        #expect(throws: CryptoError.cannotOpen) { try ReplyKey().open(sealed, requestID: request) }
    }

    @Test func sealedAnswerIsBoundToItsRequest() throws {
        let waiter = try ReplyKey()
        let sealed = try Sealing.seal(fix, to: waiter.publicKey, requestID: UUID())
        #expect(throws: CryptoError.cannotOpen) { try waiter.open(sealed, requestID: UUID()) }
    }

    @Test func alteredAnswerDoesNotOpen() throws {
        let waiter = try ReplyKey()
        let request = UUID()
        var bytes = Array(Data(base64Encoded: try Sealing.seal(fix, to: waiter.publicKey, requestID: request))!)
        bytes[50] ^= 0x01
        #expect(throws: CryptoError.cannotOpen) { try waiter.open(Data(bytes).base64EncodedString(), requestID: request) }
        #expect(throws: CryptoError.cannotOpen) { try waiter.open("not base64!", requestID: request) }
        #expect(throws: CryptoError.cannotOpen) { try waiter.open("AAAA", requestID: request) }
    }

    @Test func sealingTwiceGivesDifferentCiphertexts() throws {
        let waiter = try ReplyKey()
        let request = UUID()
        #expect(try Sealing.seal(fix, to: waiter.publicKey, requestID: request) != (try Sealing.seal(fix, to: waiter.publicKey, requestID: request)))
    }

    @Test func badRecipientKeysAreRefused() throws {
        #expect(throws: CryptoError.badKey) { try Sealing.seal(fix, to: [1, 2, 3], requestID: UUID()) }
        #expect(throws: CryptoError.badKey) { try Sealing.seal(fix, to: [UInt8](repeating: 0, count: 32), requestID: UUID()) }
    }

    /// A full location stays far below relay.settle's 6000-character limit for `sealed`.
    @Test func sealedFixFitsTheNotifyBudget() throws {
        let sealed = try Sealing.seal(fix, to: try ReplyKey().publicKey, requestID: UUID())
        #expect(sealed.count < 1000)
        #expect(try ReplyKey().publicKey.count == 32)
    }
}
