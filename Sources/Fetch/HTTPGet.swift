import CCurl
import CSystem
import Foundation

/// One bounded GET with libcurl, for the documents the relay reads from elsewhere (a JWKS,
/// an OAuth client's metadata document): a time limit for the whole transfer, a size limit
/// on the body, no redirects followed, optionally https only, pinned to an address already
/// checked (`CURLOPT_RESOLVE`: no second DNS answer) and trusting extra CAs. Blocking: run
/// it on a thread of its own, never on an event loop.
public struct HTTPGet: Sendable {
    /// The most bytes of body read; past it the transfer stops (`Failure.tooLarge`).
    public var maximumBytes: Int
    /// The whole transfer's limit.
    public var timeoutMilliseconds: Int
    /// Only https URLs (else any scheme libcurl knows, `file://` included).
    public var httpsOnly = false
    /// `host:port:address` entries that pin where a host connects.
    public var pins: [String] = []
    /// Request headers (`Name: value`).
    public var headers: [String] = []
    /// A PEM bundle of CAs to trust instead of the system's; nil: the system's.
    public var caBundle: Data?

    /// A GET bounded by `maximumBytes` and `timeoutMilliseconds`.
    public init(maximumBytes: Int, timeoutMilliseconds: Int) {
        self.maximumBytes = maximumBytes
        self.timeoutMilliseconds = timeoutMilliseconds
    }

    /// What came back: the status (0 for `file://`), the body, and `Cache-Control`'s
    /// `max-age` in seconds (0 for `no-store`/`no-cache`; nil without one).
    public struct Response: Sendable {
        public let status: Int
        public let body: Data
        public let maxAge: Int?
    }

    /// Why nothing came back, as a fixed set of cases its caller words for its readers.
    public enum Failure: Error, Equatable, Sendable {
        case timeout, refused, unknownHost, tls, unsupportedScheme, cannotReadFile, connectionLost, tooLarge, outOfMemory
        /// Any other libcurl error, with libcurl's own words.
        case other(String)
    }

    /// `max-age` of a `Cache-Control` header line; nil without one, 0 for `no-store` or
    /// `no-cache`.
    public static func maxAge(_ line: String) -> Int? { CurlBody.maxAge(line) }

    /// GETs `url`.
    public func get(_ url: String) throws(Failure) -> Response {
        guard let curl = curl_easy_init() else { throw .outOfMemory }
        defer { curl_easy_cleanup(curl) }
        var pinList: UnsafeMutablePointer<curl_slist>?
        var headerList: UnsafeMutablePointer<curl_slist>?
        for pin in pins { pinList = curl_slist_append(pinList, pin) }
        for header in headers { headerList = curl_slist_append(headerList, header) }
        defer {
            curl_slist_free_all(pinList)
            curl_slist_free_all(headerList)
        }
        let body = CurlBody(limit: maximumBytes)
        _ = wb_curl_setopt_string(curl, CURLOPT_URL, url)
        if httpsOnly { _ = wb_curl_setopt_string(curl, CURLOPT_PROTOCOLS_STR, "https") }
        if pinList != nil { _ = wb_curl_setopt_pointer(curl, CURLOPT_RESOLVE, pinList) }
        if headerList != nil { _ = wb_curl_setopt_pointer(curl, CURLOPT_HTTPHEADER, headerList) }
        _ = wb_curl_setopt_long(curl, CURLOPT_TIMEOUT_MS, timeoutMilliseconds)
        _ = wb_curl_setopt_long(curl, CURLOPT_FOLLOWLOCATION, 0)
        _ = wb_curl_setopt_long(curl, CURLOPT_NOSIGNAL, 1)
        _ = wb_curl_setopt_long(curl, CURLOPT_MAXFILESIZE, maximumBytes)
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
        if body.tooLarge || result == CURLE_FILESIZE_EXCEEDED { throw .tooLarge }
        guard result == CURLE_OK else { throw Self.failure(result) }
        var status = 0
        _ = wb_curl_getinfo_long(curl, CURLINFO_RESPONSE_CODE, &status)
        return Response(status: status, body: body.data, maxAge: body.maxAge)
    }

    private static func failure(_ code: CURLcode) -> Failure {
        switch code {
        case CURLE_OPERATION_TIMEDOUT: .timeout
        case CURLE_COULDNT_CONNECT: .refused
        case CURLE_COULDNT_RESOLVE_HOST: .unknownHost
        case CURLE_SSL_CONNECT_ERROR, CURLE_PEER_FAILED_VERIFICATION: .tls
        case CURLE_UNSUPPORTED_PROTOCOL, CURLE_URL_MALFORMAT: .unsupportedScheme
        case CURLE_FILE_COULDNT_READ_FILE: .cannotReadFile
        case CURLE_GOT_NOTHING, CURLE_RECV_ERROR, CURLE_SEND_ERROR: .connectionLost
        default: .other(String(cString: curl_easy_strerror(code)).lowercased())
        }
    }
}
