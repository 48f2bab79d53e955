import Crypto
import Push

/// `whereabot vapid-keys`: a new P-256 key pair for Web Push (RFC 8292), in the format of
/// `web-push generate-vapid-keys`: base64url private scalar and uncompressed public key.
enum VAPIDKeysCommand {
    static func run() throws -> String {
        let key = try P256Key.generate()
        return """
            VAPID_PRIVATE_KEY=\(Base64URL.encode(key.rawPrivate))
            # public key (served to browsers by /app/ for PushManager.subscribe):
            VAPID_PUBLIC_KEY=\(Base64URL.encode(key.publicPoint))
            """
    }
}
