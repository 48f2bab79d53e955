import Crypto
import Testing

/// The primitives against their RFCs' test vectors, and their refusals.
@Suite struct CryptoTests {
    private func hex(_ text: String) -> [UInt8] {
        var bytes: [UInt8] = []
        var index = text.startIndex
        while index < text.endIndex {
            let next = text.index(index, offsetBy: 2)
            bytes.append(UInt8(text[index..<next], radix: 16)!)
            index = next
        }
        return bytes
    }

    /// RFC 4648 §10's vectors in the URL alphabet, padding optional on input.
    @Test func base64URLRoundTripsAndRefuses() {
        for (plain, encoded) in [("", ""), ("f", "Zg"), ("fo", "Zm8"), ("foo", "Zm9v"), ("foob", "Zm9vYg"),
                                 ("fooba", "Zm9vYmE"), ("foobar", "Zm9vYmFy")] {
            #expect(Base64URL.encode(Array(plain.utf8)) == encoded)
            #expect(Base64URL.decode(encoded) == Array(plain.utf8))
        }
        #expect(Base64URL.decode("Zg==") == Array("f".utf8))
        #expect(Base64URL.decode("Zm8=") == Array("fo".utf8))
        #expect(Base64URL.encode([0xFB, 0xFF, 0xBF]) == "-_-_")
        #expect(Base64URL.decode("-_-_") == [0xFB, 0xFF, 0xBF])
        for bad in ["+/+/", "Zg=", "Z===", "=Zg=", "Zg=a", "Z", "Zm9vY", "Zm 9v", "Zm9v\u{0}", "é"] {
            #expect(Base64URL.decode(bad) == nil, "\(bad)")
        }
    }

    /// FIPS 180-2's "abc" and RFC 4231 test case 2.
    @Test func digests() {
        #expect(Digest.sha256(Array("abc".utf8)) == hex("ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"))
        #expect(Digest.hmacSHA256(key: Array("Jefe".utf8), Array("what do ya want for nothing?".utf8))
                == hex("5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"))
        #expect(Digest.constantTimeEqual([1, 2, 3], [1, 2, 3]))
        #expect(!Digest.constantTimeEqual([1, 2, 3], [1, 2, 4]))
        #expect(!Digest.constantTimeEqual([1, 2, 3], [1, 2]))
    }

    /// RFC 5869 test cases 1 and 3 (no salt, no info).
    @Test func hkdf() throws {
        let okm = try HKDF.sha256(secret: [UInt8](repeating: 0x0B, count: 22), salt: hex("000102030405060708090a0b0c"),
                                  info: hex("f0f1f2f3f4f5f6f7f8f9"), length: 42)
        #expect(okm == hex("3cb25f25faacd57a90434f64d0362f2a2d2d0a90cf1a5a4c5db02d56ecc4c5bf34007208d5b887185865"))
        let noSalt = try HKDF.sha256(secret: [UInt8](repeating: 0x0B, count: 22), salt: [], info: [], length: 42)
        #expect(noSalt == hex("8da4e775a563c18f715f802a063c5a31b8a11f5c5ee1879ec3454e5f3c738d2d9d201395faa4b61a96c8"))
        #expect(throws: CryptoError.failed) { try HKDF.sha256(secret: [1], salt: [], info: [], length: 0) }
    }

    /// AES-128- and AES-256-GCM: the NIST GCM spec's test case 3 (AES-128), round trips, and
    /// every way to fail opening.
    @Test func aesGCM() throws {
        let key = hex("feffe9928665731c6d6a8f9467308308"), nonce = hex("cafebabefacedbaddecaf888")
        let plain = hex("d9313225f88406e5a55909c5aff5269a86a7a9531534f7da2e4c303d8a318a721c3c0c95956809532fcf0e2449a6b525b16aedf5aa0de657ba637b391aafd255")
        let sealed = try AESGCM.seal(plain, key: key, nonce: nonce)
        #expect(sealed == hex("42831ec2217774244b7221b784d0d49ce3aa212f2c02a4e035c17e2329aca12e21d514b25466931c7d8f6a5aac84aa051ba30b396a0aac973d58e091473f5985")
                + hex("4d5c2af327cd64a62cf35abd2ba6fab4"))
        #expect(try AESGCM.open(sealed, key: key, nonce: nonce) == plain)

        let wide = try SecureRandom.bytes(32), aad = Array("row".utf8)
        let box = try AESGCM.seal(Array("fix".utf8), key: wide, nonce: nonce, aad: aad)
        #expect(try AESGCM.open(box, key: wide, nonce: nonce, aad: aad) == Array("fix".utf8))
        var altered = box
        altered[0] ^= 1
        #expect(throws: CryptoError.cannotOpen) { try AESGCM.open(altered, key: wide, nonce: nonce, aad: aad) }
        #expect(throws: CryptoError.cannotOpen) { try AESGCM.open(box, key: wide, nonce: nonce, aad: []) }
        #expect(throws: CryptoError.cannotOpen) { try AESGCM.open(box, key: try SecureRandom.bytes(32), nonce: nonce, aad: aad) }
        #expect(throws: CryptoError.cannotOpen) { try AESGCM.open(Array(box.prefix(15)), key: wide, nonce: nonce, aad: aad) }
        #expect(throws: CryptoError.badKey) { try AESGCM.seal([1], key: [1, 2, 3], nonce: nonce) }
        #expect(throws: CryptoError.badKey) { try AESGCM.open(box, key: wide, nonce: [1, 2], aad: aad) }
    }

    /// RFC 7748 §6.1: Alice's and Bob's keys and their shared secret; a low-order point is
    /// refused.
    @Test func x25519() throws {
        let alice = try X25519Key(privateKey: hex("77076d0a7318a57d3c16c17251b26645df4c2f87ebc0992ab177fba51db92c2a"))
        let bob = try X25519Key(privateKey: hex("5dab087e624a8a4b79e17f8b83800ee66f3bb1292618b6fd1c2f8b27ff88e0eb"))
        #expect(alice.publicKey == hex("8520f0098930a754748b7ddcb43ef75a0dbf3a0d26381af4eba4a98eaa9b4e6a"))
        let shared = hex("4a5d9d5ba4ce2de1728e3bf480350f25e07e21c947d19e3376f09b3c1e161742")
        #expect(try alice.sharedSecret(with: X25519Key(publicKey: bob.publicKey)) == shared)
        #expect(try bob.sharedSecret(with: alice) == shared)
        #expect(throws: CryptoError.badKey) { try alice.sharedSecret(with: X25519Key(publicKey: [UInt8](repeating: 0, count: 32))) }
        #expect(throws: CryptoError.badKey) { try X25519Key(publicKey: [1, 2, 3]) }
        #expect(throws: CryptoError.badKey) { try X25519Key(publicKey: alice.publicKey).sharedSecret(with: bob) }
        #expect(try X25519Key.generate().publicKey != X25519Key.generate().publicKey)
    }

    /// P-256: ECDH agrees both ways, an ES256 signature has JWS's 64-byte form, and a
    /// point off the curve is refused.
    @Test func p256() throws {
        let a = try P256Key.generate(), b = try P256Key.generate()
        #expect(try a.sharedSecret(with: P256Key(publicPoint: b.publicPoint)) == b.sharedSecret(with: P256Key(publicPoint: a.publicPoint)))
        let signature = try a.signES256(Array("message".utf8))
        #expect(signature.count == 64)
        #expect(try P256Key(publicPoint: a.publicPoint).verifyES256(signature, message: Array("message".utf8)))
        #expect(!b.verifyES256(signature, message: Array("message".utf8)))
        #expect(!a.verifyES256(Array(signature.prefix(63)), message: Array("message".utf8)))
        #expect(try P256Key(rawPrivate: a.rawPrivate).publicPoint == a.publicPoint)
        var offCurve = a.publicPoint
        offCurve[64] ^= 1
        #expect(throws: CryptoError.badKey) { try P256Key(publicPoint: offCurve) }
    }
}
