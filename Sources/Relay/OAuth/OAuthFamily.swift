import Foundation
import JSON

/// A token family (one per code redeemed) as the database returns it: what an access token
/// of it names.
struct OAuthFamily: Sendable, Equatable {
    let userID: UUID
    let email: String?
    let familyID: UUID
    let clientID: String
    let scope: String
    let resource: String
    /// Whether a refresh token of the family was kept (offline_access, or a client that
    /// registered the refresh_token grant).
    let refresh: Bool

    init?(_ json: JSONValue) {
        guard let user = json["user_id"]?.string.flatMap(UUID.init(uuidString:)),
              let family = json["family_id"]?.string.flatMap(UUID.init(uuidString:)),
              let client = json["client_id"]?.string, let scope = json["scope"]?.string,
              let resource = json["resource"]?.string else { return nil }
        self.userID = user
        self.email = json["email"]?.string
        self.familyID = family
        self.clientID = client
        self.scope = scope
        self.resource = resource
        self.refresh = json["refresh"]?.bool ?? false
    }
}
