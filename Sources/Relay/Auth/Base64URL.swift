import Foundation

/// Base64url without padding (RFC 4648 §5), as JWTs and JWKs use it.
enum Base64URL {
    /// Decodes base64url text (padding optional); nil when it is not base64url.
    static func decode(_ text: some StringProtocol) -> [UInt8]? {
        var base64 = String(text).replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
        guard !base64.contains("=") || base64.hasSuffix("=") else { return nil }
        base64 = base64.trimmingCharacters(in: CharacterSet(charactersIn: "="))
        while base64.count % 4 != 0 { base64 += "=" }
        return Data(base64Encoded: base64).map(Array.init)
    }

    /// Encodes bytes as base64url without padding.
    static func encode(_ bytes: some Sequence<UInt8>) -> String {
        Data(bytes).base64EncodedString()
            .replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
            .replacingOccurrences(of: "=", with: "")
    }
}
