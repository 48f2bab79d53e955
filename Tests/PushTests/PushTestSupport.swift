import COpenSSL
import Foundation
@testable import Push
import Synchronization

/// A clock tests move by hand.
final class TestClock: Sendable {
    private let now = Mutex(Date(timeIntervalSince1970: 1_796_000_000))
    var date: Date { now.withLock { $0 } }
    func advance(_ seconds: TimeInterval) { now.withLock { $0 += seconds } }
    var function: @Sendable () -> Date { { self.date } }
}

/// A compact JWS split and decoded, with its ES256 signature checked by OpenSSL.
struct DecodedJWT {
    let header: [String: Any]
    let claims: [String: Any]

    init(_ token: String, publicPoint: [UInt8]) throws {
        let parts = token.split(separator: ".").map(String.init)
        guard parts.count == 3, let header = PushBase64URL.decode(parts[0]), let claims = PushBase64URL.decode(parts[1]),
              let signature = PushBase64URL.decode(parts[2]), signature.count == 64 else { throw PushCryptoError.badKey }
        self.header = try JSONSerialization.jsonObject(with: Data(header)) as! [String: Any]
        self.claims = try JSONSerialization.jsonObject(with: Data(claims)) as! [String: Any]
        let key = try P256Key(publicPoint: publicPoint)
        guard Self.verify(Array("\(parts[0]).\(parts[1])".utf8), signature: signature, key: key) else { throw PushCryptoError.badKey }
    }

    /// ECDSA P-256/SHA-256 verification of a raw r ‖ s signature.
    static func verify(_ message: [UInt8], signature: [UInt8], key: P256Key) -> Bool {
        func integer(_ bytes: ArraySlice<UInt8>) -> [UInt8] {
            var magnitude = Array(bytes.drop { $0 == 0 })
            if magnitude.isEmpty || magnitude[0] & 0x80 != 0 { magnitude.insert(0, at: 0) }
            return [0x02, UInt8(magnitude.count)] + magnitude
        }
        let content = integer(signature[0..<32]) + integer(signature[32..<64])
        let der = [0x30, UInt8(content.count)] + content
        guard let context = EVP_MD_CTX_new() else { return false }
        defer { EVP_MD_CTX_free(context) }
        return EVP_DigestVerifyInit(context, nil, EVP_sha256(), nil, key.key) == 1
            && EVP_DigestVerify(context, der, der.count, message, message.count) == 1
    }
}

/// A PEM private key made by the `openssl` command (as Apple's `.p8` files are PKCS#8).
func opensslPEM(_ arguments: [String]) throws -> String {
    let process = Process()
    process.executableURL = URL(fileURLWithPath: "/usr/bin/openssl")
    process.arguments = arguments
    let pipe = Pipe()
    process.standardOutput = pipe
    process.standardError = FileHandle.nullDevice
    try process.run()
    let data = pipe.fileHandleForReading.readDataToEndOfFile()
    process.waitUntilExit()
    return String(decoding: data, as: UTF8.self)
}
