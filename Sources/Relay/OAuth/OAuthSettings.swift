import Foundation

/// How the relay's authorization server for agents behaves (the `OAUTH_*` settings).
public struct OAuthSettings: Sendable {
    /// OAUTH_ACCESS_TOKEN_SECONDS: an access token's life (60 to 86,400).
    public var accessTokenSeconds = 3600
    /// OAUTH_REFRESH_TOKEN_DAYS: a refresh token family's life from its last use (1 to 365).
    public var refreshTokenDays = 30
    /// OAUTH_STALE_CLIENT_DAYS: a registered client unused this long, with no grant, is swept.
    public var staleClientDays = 30
    /// OAUTH_CIMD_ALLOW_LOOPBACK=1: client metadata documents may be fetched from loopback
    /// addresses (tests only; private and link-local ones never).
    public var documentsFromLoopback = false
    /// OAUTH_CIMD_CA_FILE: PEM certificates trusted for client metadata documents besides
    /// the system's.
    public var documentCAFile: String?
    /// How long an authorization request waits for the person's decision.
    public var authorizationSeconds = 600
    /// How long a code lives (single use).
    public static let codeSeconds = 60
    /// The scopes a client may ask for; `location` is always granted.
    public static let scopesSupported = ["location", "offline_access"]

    /// The defaults.
    public init() {}

    /// The system's CA bundle followed by `documentCAFile`'s certificates, or nil without one.
    func caBundle() throws -> Data? {
        guard let documentCAFile else { return nil }
        let system = (try? Data(contentsOf: URL(fileURLWithPath: "/etc/ssl/certs/ca-certificates.crt"))) ?? Data()
        return system + Data("\n".utf8) + (try Data(contentsOf: URL(fileURLWithPath: documentCAFile)))
    }
}
