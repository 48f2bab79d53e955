import Crypto
import Foundation
@testable import Push
import Testing

/// RFC 8291 encryption and the P-256 key formats push uses.
@Suite struct WebPushEncryptionTests {
    /// The RFC 8291 §5 example, byte for byte, given its sender key and salt.
    @Test func reproducesTheRFC8291Example() throws {
        let sender = try P256Key(rawPrivate: try #require(Base64URL.decode("yfWPiYE-n46HLnH0KqZOF1fJJU3MYrct3AELtAQ-oRw")))
        let body = try WebPushEncryption.encrypt(
            Array("When I grow up, I want to be a watermelon".utf8),
            p256dh: try #require(Base64URL.decode("BCVxsr7N_eNgVRqvHtD0zTZsEc6-VV-JvLexhqUzORcxaOzi6-AYWXvTBHm4bjyPjs7Vd8pZGH6SRpkNtoIAiw4")),
            auth: try #require(Base64URL.decode("BTBZMqHH6r4Tts7J_aSIgg")),
            senderKey: sender, salt: try #require(Base64URL.decode("DGv6ra1nlYgDCS1FRnbzlw")))
        #expect(Base64URL.encode(body) ==
            "DGv6ra1nlYgDCS1FRnbzlwAAEABBBP4z9KsN6nGRTbVYI_c7VJSPQTBtkgcy27mlmlMoZIIgDll6e3vCYLocInmYWAmS6TlzAC8wEqKK6PBru3jl7A_yl95bQpu6cVPTpK4Mqgkf1CXztLVBSt2Ks3oZwbuwXPXLWyouBWLVWGNWQexSgSxsj_Qulcy4a-fN")
    }

    /// Every message has a fresh sender key and salt; the size limit keeps the body ≤ 4096.
    @Test func freshKeysPerMessageAndTheSizeLimit() throws {
        let receiver = try P256Key.generate()
        let auth = [UInt8](repeating: 7, count: 16)
        let one = try WebPushEncryption.encrypt([1, 2, 3], p256dh: receiver.publicPoint, auth: auth)
        let two = try WebPushEncryption.encrypt([1, 2, 3], p256dh: receiver.publicPoint, auth: auth)
        #expect(one.prefix(16) != two.prefix(16))
        #expect(one[21..<86] != two[21..<86])
        #expect(one.count == 86 + 3 + 1 + 16)
        let largest = try WebPushEncryption.encrypt([UInt8](repeating: 65, count: 3993), p256dh: receiver.publicPoint, auth: auth)
        #expect(largest.count == 4096)
        #expect(throws: WebPushEncryptionError.payloadTooLarge) {
            try WebPushEncryption.encrypt([UInt8](repeating: 65, count: 3994), p256dh: receiver.publicPoint, auth: auth)
        }
    }

    /// Bad subscription keys are refused, never a crash: a point off the curve, wrong lengths.
    @Test func refusesBadSubscriptionKeys() throws {
        let receiver = try P256Key.generate()
        var offCurve = receiver.publicPoint
        offCurve[64] ^= 1
        #expect(throws: CryptoError.badKey) { try WebPushEncryption.encrypt([1], p256dh: offCurve, auth: [UInt8](repeating: 0, count: 16)) }
        #expect(throws: CryptoError.badKey) { try WebPushEncryption.encrypt([1], p256dh: Array(receiver.publicPoint.prefix(33)), auth: [UInt8](repeating: 0, count: 16)) }
        #expect(throws: CryptoError.badKey) { try WebPushEncryption.encrypt([1], p256dh: receiver.publicPoint, auth: [1, 2]) }
    }

    /// Keys load from PKCS#8 PEM (Apple's .p8) and raw scalars; other curves and garbage are refused.
    @Test func loadsKeysAndRefusesOtherCurves() async throws {
        let pem = try await opensslPEM(["genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256"])
        let key = try P256Key(pem: pem)
        #expect(key.publicPoint.count == 65)
        let again = try P256Key(rawPrivate: key.rawPrivate)
        #expect(again.publicPoint == key.publicPoint)
        let p384 = try await opensslPEM(["genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-384"])
        #expect(throws: CryptoError.badKey) { try P256Key(pem: p384) }
        #expect(throws: CryptoError.badKey) { try P256Key(pem: "-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n") }
        #expect(throws: CryptoError.badKey) { try P256Key(rawPrivate: [UInt8](repeating: 0, count: 32)) }
        #expect(throws: CryptoError.badKey) { try P256Key(rawPrivate: [UInt8](repeating: 0xFF, count: 32)) }
        #expect(throws: CryptoError.badKey) { try P256Key(rawPrivate: [1, 2, 3]) }
    }

    /// ES256 signatures verify, and ECDH agrees from both sides.
    @Test func signsAndAgrees() throws {
        let one = try P256Key.generate(), two = try P256Key.generate()
        for _ in 0..<20 {
            let signature = try one.signES256(Array("message".utf8))
            #expect(signature.count == 64)
            let verifier = try P256Key(publicPoint: one.publicPoint)
            #expect(verifier.verifyES256(signature, message: Array("message".utf8)))
            #expect(!verifier.verifyES256(signature, message: Array("massage".utf8)))
            #expect(!(try P256Key(publicPoint: two.publicPoint)).verifyES256(signature, message: Array("message".utf8)))
        }
        #expect(try one.sharedSecret(with: P256Key(publicPoint: two.publicPoint)) == two.sharedSecret(with: P256Key(publicPoint: one.publicPoint)))
    }
}
