import CCurl
import CSystem
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
        guard let curl = curl_easy_init() else { throw failure("out of memory") }
        defer { curl_easy_cleanup(curl) }
        let body = CurlBody(limit: JWKSSource.maximumBytes)
        _ = wb_curl_setopt_string(curl, CURLOPT_URL, url)
        _ = wb_curl_setopt_long(curl, CURLOPT_TIMEOUT_MS, 5000)
        _ = wb_curl_setopt_long(curl, CURLOPT_FOLLOWLOCATION, 0)
        _ = wb_curl_setopt_long(curl, CURLOPT_NOSIGNAL, 1)
        body.receive(from: curl)
        let result = curl_easy_perform(curl)
        if body.tooLarge { throw failure("larger than 256 KiB") }
        guard result == CURLE_OK else { throw failure(Self.reason(result)) }
        var status = 0
        _ = wb_curl_getinfo_long(curl, CURLINFO_RESPONSE_CODE, &status)
        // file:// answers 0; anything HTTP must be 200.
        guard status == 0 || status == 200 else { throw failure("HTTP \(status)") }
        return (body.data, body.maxAge)
    }

    /// libcurl's result as a short reason.
    private static func reason(_ code: CURLcode) -> String {
        switch code {
        case CURLE_OPERATION_TIMEDOUT: "timeout"
        case CURLE_COULDNT_CONNECT: "connection refused"
        case CURLE_COULDNT_RESOLVE_HOST: "unknown host"
        case CURLE_SSL_CONNECT_ERROR, CURLE_PEER_FAILED_VERIFICATION: "TLS failed"
        case CURLE_UNSUPPORTED_PROTOCOL, CURLE_URL_MALFORMAT: "not an http(s) URL"
        case CURLE_FILE_COULDNT_READ_FILE: "cannot read the file"
        case CURLE_GOT_NOTHING, CURLE_RECV_ERROR, CURLE_SEND_ERROR: "connection lost"
        default: String(cString: curl_easy_strerror(code)).lowercased()
        }
    }
}
