import Foundation

/// An authorization request waiting for the person's consent.
struct OAuthAuthorization: Sendable {
    let id: UUID
    let client: OAuthClient
    /// What the person sees as where the agent lives: the document URL's host, or the
    /// redirect URI's (a private-use scheme's name when it has no host).
    let clientHost: String
    let redirectURI: String
    let codeChallenge: String
    let state: String?
    let scope: String
    let resource: String
}
