import Crypto
import Foundation
import Synchronization

/// RFC 8292 VAPID: the `Authorization: vapid t=<JWT>, k=<public key>` header for a push
/// service. The JWT's `aud` is the endpoint's origin, `exp` 12 h ahead (RFC 8292 allows at
/// most 24 h), `sub` the operator's contact; one token per origin, renewed when less than
/// an hour remains.
public final class VAPIDToken: Sendable {
    /// How far ahead `exp` lies.
    public static let lifetime: TimeInterval = 12 * 3600
    /// A cached token is renewed when less than this remains.
    public static let renewBefore: TimeInterval = 3600
    /// Origins cached at once (the endpoint allow-list keeps this small anyway).
    static let maximumOrigins = 256

    private let key: P256Key
    private let subject: String
    private let clock: @Sendable () -> Date
    private let cache = Mutex<[String: (token: String, expires: Date)]>([:])
    /// The public key browsers subscribe with (base64url of the 65-byte point).
    public let publicKey: String

    /// A VAPID signer; throws `badSubject` unless `subject` is a `mailto:` address or an
    /// `https:` URL (push services refuse others).
    public init(key: P256Key, subject: String, clock: @escaping @Sendable () -> Date = Date.init) throws {
        guard Self.isValidSubject(subject) else { throw PushConfigurationError.badSubject }
        self.key = key
        self.subject = subject
        self.clock = clock
        self.publicKey = Base64URL.encode(key.publicPoint)
    }

    /// `mailto:user@host` (host not localhost) or `https://host…`.
    static func isValidSubject(_ subject: String) -> Bool {
        guard subject.count <= 256, !subject.contains(where: { $0.isWhitespace || $0.asciiValue.map { $0 < 0x20 } ?? false }) else {
            return false
        }
        if subject.hasPrefix("mailto:") {
            let parts = subject.dropFirst(7).split(separator: "@", omittingEmptySubsequences: false)
            guard parts.count == 2, !parts[0].isEmpty, parts[1].contains(".") else { return false }
            return parts[1].lowercased() != "localhost"
        }
        if subject.hasPrefix("https://"), let url = URLComponents(string: subject), let host = url.host, !host.isEmpty {
            return true
        }
        return false
    }

    /// `scheme://host[:port]` of an endpoint, lowercased; nil when it is not an https URL.
    public static func origin(of endpoint: String) -> String? {
        PushEndpoint(endpoint)?.origin
    }

    /// Origins with a cached token now (at most `maximumOrigins`).
    var cachedOrigins: Int { cache.withLock { $0.count } }

    /// The Authorization header value for a push to `endpoint`.
    public func authorization(for endpoint: String) throws -> String {
        guard let audience = Self.origin(of: endpoint) else { throw PushConfigurationError.badEndpoint }
        return "vapid t=\(try token(audience: audience)), k=\(publicKey)"
    }

    /// The JWT for `audience`, cached until an hour before it expires.
    func token(audience: String) throws -> String {
        try cache.withLock { cache in
            let now = clock()
            if let cached = cache[audience], cached.expires.timeIntervalSince(now) > Self.renewBefore { return cached.token }
            let expires = Date(timeIntervalSince1970: (now.timeIntervalSince1970 + Self.lifetime).rounded(.down))
            let claims = #"{"aud":\#(ES256JWT.quoted(audience)),"exp":\#(Int(expires.timeIntervalSince1970)),"sub":\#(ES256JWT.quoted(subject))}"#
            let token = try ES256JWT.sign(header: #"{"typ":"JWT","alg":"ES256"}"#, claims: claims, key: key)
            if cache.count >= Self.maximumOrigins, cache[audience] == nil { cache.removeAll() }
            cache[audience] = (token, expires)
            return token
        }
    }
}

/// A push setting that cannot work; `serve` stops at start naming the variable.
public enum PushConfigurationError: Error, Equatable, Sendable {
    /// VAPID_SUBJECT is not `mailto:` or `https:`.
    case badSubject
    /// An endpoint that is not an https URL.
    case badEndpoint
}
