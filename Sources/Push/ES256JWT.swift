import Crypto
import Foundation

/// A compact JWS signed with ES256, as APNs provider tokens and VAPID use it.
enum ES256JWT {
    /// `base64url(header).base64url(claims).base64url(r ‖ s)`; header and claims are JSON text.
    static func sign(header: String, claims: String, key: P256Key) throws -> String {
        let input = Base64URL.encode(Array(header.utf8)) + "." + Base64URL.encode(Array(claims.utf8))
        return input + "." + Base64URL.encode(try key.signES256(Array(input.utf8)))
    }

    /// A JSON string literal (quotes and escapes) for `text`.
    static func quoted(_ text: String) -> String {
        var out = "\""
        for scalar in text.unicodeScalars {
            switch scalar {
            case "\"": out += "\\\""
            case "\\": out += "\\\\"
            case _ where scalar.value < 0x20: out += String(format: "\\u%04x", scalar.value)
            default: out.unicodeScalars.append(scalar)
            }
        }
        return out + "\""
    }
}
