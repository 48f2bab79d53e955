import CCurl
import CSystem
import Foundation

/// Where the JWKS comes from: SUPABASE_JWKS_FILE or SUPABASE_JWKS_URL (fetched with
/// libcurl, 5 s timeout, at most 256 KiB).
public enum JWKSSource: Sendable, Equatable {
    /// No asymmetric keys (HS256 only).
    case none
    /// A file on disk, read at start and on refetch.
    case file(String)
    /// An HTTP(S) URL, fetched at start and on refetch.
    case url(String)

    /// The largest JWKS document accepted.
    static let maximumBytes = 256 * 1024

    /// Loads the document; nil for `.none`.
    func load() throws -> Data? {
        switch self {
        case .none:
            return nil
        case .file(let path):
            guard let data = FileManager.default.contents(atPath: path), data.count <= Self.maximumBytes else {
                throw AuthError.badKey
            }
            return data
        case .url(let url):
            return try Self.fetch(url)
        }
    }

    private final class Sink {
        var data = Data()
        var tooLarge = false
    }

    private static func fetch(_ url: String) throws -> Data {
        guard let curl = curl_easy_init() else { throw AuthError.badKey }
        defer { curl_easy_cleanup(curl) }
        let sink = Sink()
        _ = wb_curl_setopt_string(curl, CURLOPT_URL, url)
        _ = wb_curl_setopt_long(curl, CURLOPT_TIMEOUT_MS, 5000)
        _ = wb_curl_setopt_long(curl, CURLOPT_FOLLOWLOCATION, 0)
        _ = wb_curl_setopt_long(curl, CURLOPT_NOSIGNAL, 1)
        _ = wb_curl_setopt_write_callback(curl, CURLOPT_WRITEFUNCTION) { data, size, count, user in
            let sink = Unmanaged<Sink>.fromOpaque(user!).takeUnretainedValue()
            let length = size * count
            if sink.data.count + length > JWKSSource.maximumBytes {
                sink.tooLarge = true
                return 0
            }
            sink.data.append(UnsafeRawPointer(data!).assumingMemoryBound(to: UInt8.self), count: length)
            return length
        }
        _ = wb_curl_setopt_pointer(curl, CURLOPT_WRITEDATA, Unmanaged.passUnretained(sink).toOpaque())
        guard curl_easy_perform(curl) == CURLE_OK, !sink.tooLarge else { throw AuthError.badKey }
        var status = 0
        _ = wb_curl_getinfo_long(curl, CURLINFO_RESPONSE_CODE, &status)
        // file:// answers 0; anything HTTP must be 200.
        guard status == 0 || status == 200 else { throw AuthError.badKey }
        return sink.data
    }
}
