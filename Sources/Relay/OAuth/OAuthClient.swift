import Foundation
import JSON
import RelayCore

/// An OAuth client of the relay's authorization server: registered (RFC 7591, id `wbc_…`)
/// or described by a client metadata document (CIMD, id = the document's https URL).
struct OAuthClient: Sendable, Equatable {
    /// How the client authenticates at the token endpoint.
    enum AuthMethod: String, Sendable {
        case none
        case secretPost = "client_secret_post"
        case secretBasic = "client_secret_basic"
    }

    /// How the relay learnt of it.
    enum Kind: String, Sendable {
        case registered, document
    }

    let id: String
    let kind: Kind
    /// The name the person sees (cleaned as a locate's reason is, at most `maximumNameLength`; may be empty).
    let name: String
    let redirectURIs: [String]
    /// `authorization_code`, and `refresh_token` when it asked for refresh tokens.
    let grantTypes: [String]
    let authMethod: AuthMethod
    /// SHA-256 of a confidential client's secret.
    let secretDigest: [UInt8]?

    /// Longest client name shown, after cleaning.
    static let maximumNameLength = 60
    /// Most redirect URIs a client may list.
    static let maximumRedirectURIs = 10
    /// Grant types a client may register.
    static let grantTypesSupported = ["authorization_code", "refresh_token"]

    /// Whether refresh tokens go to this client even without `offline_access`.
    var wantsRefreshTokens: Bool { grantTypes.contains("refresh_token") }

    /// The client as `relay.oauth_client` returns it.
    init?(stored json: JSONValue, id: String) {
        guard let kind = json["kind"]?.string.flatMap(Kind.init), let name = json["client_name"]?.string,
              let uris = json["redirect_uris"]?.array?.compactMap(\.string), let grants = json["grant_types"]?.array?.compactMap(\.string),
              let method = json["auth_method"]?.string.flatMap(AuthMethod.init) else { return nil }
        let digest = json["secret_digest"]?.string.flatMap(Self.hexBytes)
        self.init(id: id, kind: kind, name: name, redirectURIs: uris, grantTypes: grants, authMethod: method, secretDigest: digest)
    }

    init(id: String, kind: Kind, name: String, redirectURIs: [String], grantTypes: [String], authMethod: AuthMethod,
         secretDigest: [UInt8]?) {
        self.id = id
        self.kind = kind
        self.name = name
        self.redirectURIs = redirectURIs
        self.grantTypes = grantTypes
        self.authMethod = authMethod
        self.secretDigest = secretDigest
    }

    /// Why client metadata was refused (RFC 7591 §3.2.2's error codes).
    struct MetadataRefusal: Error, Equatable {
        /// `invalid_redirect_uri` or `invalid_client_metadata`.
        let code: String
        let description: String
        static func metadata(_ text: String) -> Self { Self(code: "invalid_client_metadata", description: text) }
    }

    /// A client from registration or document metadata (`json`), checked: redirect URIs
    /// (1 to 10, each `RedirectURI.isRegistrable`), grant types, `response_types` (`code`),
    /// the auth method (`allowedMethods`), and the name cleaned. `defaultMethod` applies
    /// when the metadata names none.
    static func fromMetadata(_ json: JSONValue, id: String, kind: Kind, allowedMethods: [AuthMethod],
                             defaultMethod: AuthMethod, secretDigest: (AuthMethod) -> [UInt8]?) -> Result<OAuthClient, MetadataRefusal> {
        guard case .object = json else { return .failure(.metadata("The client metadata is not a JSON object.")) }
        guard let list = json["redirect_uris"]?.array, !list.isEmpty, list.count <= maximumRedirectURIs else {
            return .failure(MetadataRefusal(code: "invalid_redirect_uri", description: "redirect_uris must list 1 to 10 URIs."))
        }
        var uris: [String] = []
        for item in list {
            guard let uri = item.string, RedirectURI.isRegistrable(uri) else {
                return .failure(MetadataRefusal(code: "invalid_redirect_uri", description:
                    "Each redirect URI must be https, a loopback http URI, or a private-use scheme, with no fragment or user name."))
            }
            uris.append(uri)
        }
        var grants = ["authorization_code"]
        if let value = json["grant_types"] {
            guard let list = value.array?.compactMap(\.string), list.count == value.array?.count,
                  list.allSatisfy(grantTypesSupported.contains), list.contains("authorization_code") else {
                return .failure(.metadata("grant_types may hold authorization_code and refresh_token only, and must hold authorization_code."))
            }
            grants = grantTypesSupported.filter(list.contains)
        }
        if let value = json["response_types"] {
            guard let list = value.array?.compactMap(\.string), list == ["code"] else {
                return .failure(.metadata("response_types must be [\"code\"]."))
            }
        }
        var method = defaultMethod
        if let value = json["token_endpoint_auth_method"] {
            guard let named = value.string.flatMap(AuthMethod.init), allowedMethods.contains(named) else {
                let names = allowedMethods.map(\.rawValue).joined(separator: ", ")
                return .failure(.metadata("token_endpoint_auth_method must be one of: \(names)."))
            }
            method = named
        }
        var name = ""
        if let value = json["client_name"] {
            guard let text = value.string else { return .failure(.metadata("client_name must be a string.")) }
            name = String(LocateReason.clean(text).prefix(maximumNameLength))
        }
        return .success(OAuthClient(id: id, kind: kind, name: name, redirectURIs: uris, grantTypes: grants, authMethod: method,
                                    secretDigest: secretDigest(method)))
    }

    /// The redirect URI this client registered that `requested` matches (exactly, or a
    /// loopback one on another port: RFC 8252 §7.3), or nil.
    func redirectURI(matching requested: String) -> String? {
        redirectURIs.contains { RedirectURI.matches(registered: $0, requested: requested) } ? requested : nil
    }

    private static func hexBytes(_ text: String) -> [UInt8]? {
        guard text.utf8.count == 64 else { return nil }
        var bytes: [UInt8] = []
        var index = text.startIndex
        while index < text.endIndex {
            let next = text.index(index, offsetBy: 2)
            guard let byte = UInt8(text[index..<next], radix: 16) else { return nil }
            bytes.append(byte)
            index = next
        }
        return bytes
    }
}
