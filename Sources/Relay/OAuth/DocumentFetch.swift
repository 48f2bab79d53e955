import CCurl
import CSystem
import Foundation

/// One GET of a client metadata document (CIMD) with every bound the relay owes the
/// network it runs in: https only, no redirects followed, 5 s in all, 5 KB at most, to an
/// address `FetchAddress` checked and curl is pinned to. Blocking: run it on a thread of
/// its own, never on the event loop.
struct DocumentFetch: Sendable {
    /// Longest document read.
    static let maximumBytes = 5 * 1024
    /// The whole fetch's time limit.
    static let timeoutMilliseconds = 5000

    /// Whether loopback addresses may be fetched from (OAUTH_CIMD_ALLOW_LOOPBACK=1, tests).
    let allowLoopback: Bool
    /// The CAs to trust: the system's plus OAUTH_CIMD_CA_FILE's, as one PEM bundle; nil:
    /// the system's only.
    let caBundle: Data?

    /// What a fetch brought: the body, and `Cache-Control`'s `max-age` if it had one.
    struct Fetched {
        let body: Data
        let maxAge: Int?
    }

    /// Why a document could not be fetched (a short reason, for the error page and logs;
    /// it names no address).
    struct Failure: Error, Equatable {
        let reason: String
    }

    /// Fetches `url` (already checked to be an https URL with a host).
    func fetch(_ url: URL) throws(Failure) -> Fetched {
        guard let host = url.host, !host.isEmpty else { throw Failure(reason: "no host") }
        let bareHost = host.hasPrefix("[") ? String(host.dropFirst().dropLast()) : host
        guard let address = FetchAddress.resolve(bareHost, allowLoopback: allowLoopback) else {
            throw Failure(reason: "its host is unknown or not on the public internet")
        }
        guard let curl = curl_easy_init() else { throw Failure(reason: "out of memory") }
        defer { curl_easy_cleanup(curl) }
        var pins: UnsafeMutablePointer<curl_slist>? = curl_slist_append(nil, "\(host):\(url.port ?? 443):\(address)")
        var headers: UnsafeMutablePointer<curl_slist>? = curl_slist_append(nil, "Accept: application/json")
        defer {
            curl_slist_free_all(pins)
            curl_slist_free_all(headers)
            pins = nil
            headers = nil
        }
        let body = CurlBody(limit: Self.maximumBytes)
        _ = wb_curl_setopt_string(curl, CURLOPT_URL, url.absoluteString)
        _ = wb_curl_setopt_string(curl, CURLOPT_PROTOCOLS_STR, "https")
        _ = wb_curl_setopt_pointer(curl, CURLOPT_RESOLVE, pins)
        _ = wb_curl_setopt_pointer(curl, CURLOPT_HTTPHEADER, headers)
        _ = wb_curl_setopt_long(curl, CURLOPT_TIMEOUT_MS, Self.timeoutMilliseconds)
        _ = wb_curl_setopt_long(curl, CURLOPT_FOLLOWLOCATION, 0)
        _ = wb_curl_setopt_long(curl, CURLOPT_NOSIGNAL, 1)
        _ = wb_curl_setopt_long(curl, CURLOPT_MAXFILESIZE, Self.maximumBytes)
        var blob = curl_blob()
        if let caBundle {
            caBundle.withUnsafeBytes { bytes in
                blob = curl_blob(data: UnsafeMutableRawPointer(mutating: bytes.baseAddress), len: bytes.count,
                                 flags: UInt32(CURL_BLOB_COPY))
                _ = withUnsafeMutablePointer(to: &blob) { wb_curl_setopt_pointer(curl, CURLOPT_CAINFO_BLOB, $0) }
            }
        }
        body.receive(from: curl)
        let result = curl_easy_perform(curl)
        if body.tooLarge || result == CURLE_FILESIZE_EXCEEDED { throw Failure(reason: "it is larger than 5 KB") }
        guard result == CURLE_OK else { throw Failure(reason: Self.reason(result)) }
        var status = 0
        _ = wb_curl_getinfo_long(curl, CURLINFO_RESPONSE_CODE, &status)
        guard status == 200 else { throw Failure(reason: "it answered HTTP \(status)") }
        return Fetched(body: body.data, maxAge: body.maxAge)
    }

    private static func reason(_ code: CURLcode) -> String {
        switch code {
        case CURLE_OPERATION_TIMEDOUT: "it did not answer within 5 s"
        case CURLE_COULDNT_CONNECT: "the connection was refused"
        case CURLE_SSL_CONNECT_ERROR, CURLE_PEER_FAILED_VERIFICATION: "its TLS certificate did not verify"
        case CURLE_UNSUPPORTED_PROTOCOL: "it is not https"
        default: "the fetch failed"
        }
    }
}
