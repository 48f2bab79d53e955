import Crypto
import Foundation
@testable import Push
import Synchronization
import TestSupport

/// A clock tests move by hand.
final class TestClock: Sendable {
    private let now = Mutex(Date(timeIntervalSince1970: 1_796_000_000))
    var date: Date { now.withLock { $0 } }
    func advance(_ seconds: TimeInterval) { now.withLock { $0 += seconds } }
    var function: @Sendable () -> Date { { self.date } }
}

/// A compact JWS split and decoded, with its ES256 signature checked.
struct DecodedJWT {
    let header: [String: Any]
    let claims: [String: Any]

    init(_ token: String, publicPoint: [UInt8]) throws {
        let parts = token.split(separator: ".").map(String.init)
        guard parts.count == 3, let header = Base64URL.decode(parts[0]), let claims = Base64URL.decode(parts[1]),
              let signature = Base64URL.decode(parts[2]), signature.count == 64 else { throw CryptoError.badKey }
        self.header = try JSONSerialization.jsonObject(with: Data(header)) as! [String: Any]
        self.claims = try JSONSerialization.jsonObject(with: Data(claims)) as! [String: Any]
        let key = try P256Key(publicPoint: publicPoint)
        guard key.verifyES256(signature, message: Array("\(parts[0]).\(parts[1])".utf8)) else { throw CryptoError.badKey }
    }
}

/// A PEM private key made by the `openssl` command (as Apple's `.p8` files are PKCS#8).
func opensslPEM(_ arguments: [String]) async throws -> String {
    try await ChildProcess.run(URL(fileURLWithPath: "/usr/bin/openssl"), arguments, discardingStandardError: true).stdout
}
