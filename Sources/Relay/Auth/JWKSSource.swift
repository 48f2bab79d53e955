import Fetch
import Foundation

/// Where the JWKS comes from: SUPABASE_JWKS_FILE or SUPABASE_JWKS_URL (fetched with
/// libcurl, 5 s timeout, at most 256 KiB; its `Cache-Control` says when to read it again,
/// `Authenticator.refreshKeys()`).
public enum JWKSSource: Sendable, Equatable {
    /// No asymmetric keys (HS256 only).
    case none
    /// A file on disk, read at start and on refetch.
    case file(String)
    /// An HTTP(S) URL, fetched at start (and retried until it answers) and on refetch.
    case url(String)

    /// Why the keys could not be read, naming the source (a URL without any userinfo or
    /// query) and a reason from a fixed list — for /readyz and the log.
    public struct LoadError: Error, Equatable, CustomStringConvertible {
        /// The file or URL.
        public let source: String
        /// `timeout`, `connection refused`, `HTTP 404`, `not a JWKS document`, ...
        public let reason: String
        public var description: String { "signing keys \(source): \(reason)" }
    }

    /// The largest JWKS document accepted.
    static let maximumBytes = 256 * 1024

    /// The source as operators may see it: a file's path, or the URL without userinfo,
    /// query or fragment.
    var displayName: String {
        switch self {
        case .none: return "none"
        case .file(let path): return path
        case .url(let url):
            guard var components = URLComponents(string: url) else { return "(an unparsable URL)" }
            components.user = nil
            components.password = nil
            components.query = nil
            components.fragment = nil
            return components.string ?? "(an unparsable URL)"
        }
    }

    /// A loaded key set: its verifier, and how long its source said it may be kept (the
    /// response's `Cache-Control` `max-age`; nil for a file or without the header).
    struct Loaded {
        let verifier: JWTVerifier
        let maxAge: Int?
    }

    /// Loads the document; nil for `.none`.
    func load() throws(LoadError) -> (data: Data?, maxAge: Int?) {
        switch self {
        case .none:
            return (nil, nil)
        case .file(let path):
            guard let data = FileManager.default.contents(atPath: path) else { throw failure("cannot read the file") }
            guard data.count <= Self.maximumBytes else { throw failure("larger than 256 KiB") }
            return (data, nil)
        case .url(let url):
            return try fetch(url)
        }
    }

    /// A verifier over the keys (and `hmacSecret`), or why not.
    func verifier(hmacSecret: String?, issuer: String?, audience: String?) throws(LoadError) -> JWTVerifier {
        try keys(hmacSecret: hmacSecret, issuer: issuer, audience: audience).verifier
    }

    /// The keys (and `hmacSecret`) with how long they may be kept, or why not.
    func keys(hmacSecret: String?, issuer: String?, audience: String?) throws(LoadError) -> Loaded {
        let (data, maxAge) = try load()
        do {
            return Loaded(verifier: try JWTVerifier(hmacSecret: hmacSecret, jwks: data, issuer: issuer, audience: audience),
                          maxAge: maxAge)
        } catch {
            throw failure("not a JWKS document")
        }
    }

    private func failure(_ reason: String) -> LoadError { LoadError(source: displayName, reason: reason) }

    private func fetch(_ url: String) throws(LoadError) -> (data: Data, maxAge: Int?) {
        let response: HTTPGet.Response
        do {
            response = try HTTPGet(maximumBytes: Self.maximumBytes, timeoutMilliseconds: 5000).get(url)
        } catch {
            throw failure(Self.reason(error))
        }
        // file:// answers 0; anything HTTP must be 200.
        guard response.status == 0 || response.status == 200 else { throw failure("HTTP \(response.status)") }
        return (response.body, response.maxAge)
    }

    /// A failed fetch as a short reason.
    private static func reason(_ failure: HTTPGet.Failure) -> String {
        switch failure {
        case .timeout: "timeout"
        case .refused: "connection refused"
        case .unknownHost: "unknown host"
        case .tls: "TLS failed"
        case .unsupportedScheme: "not an http(s) URL"
        case .cannotReadFile: "cannot read the file"
        case .connectionLost: "connection lost"
        case .tooLarge: "larger than 256 KiB"
        case .outOfMemory: "out of memory"
        case .other(let words): words
        }
    }
}
