import CCurl
import CSystem
import Foundation

/// A response body libcurl writes into, at most `limit` bytes: past it the transfer stops
/// (`tooLarge`). One per transfer; the transfer's caller keeps it alive while it runs
/// (the JWKS fetch, a client metadata document's fetch).
final class CurlBody {
    /// The most bytes kept.
    let limit: Int
    /// What arrived so far.
    private(set) var data = Data()
    /// Whether the body went past `limit` (the transfer was stopped).
    private(set) var tooLarge = false

    init(limit: Int) {
        self.limit = limit
    }

    /// Makes `curl`'s transfer write its body here.
    func receive(from curl: UnsafeMutableRawPointer) {
        _ = wb_curl_setopt_write_callback(curl, CURLOPT_WRITEFUNCTION) { data, size, count, user in
            let body = Unmanaged<CurlBody>.fromOpaque(user!).takeUnretainedValue()
            let length = size * count
            if body.data.count + length > body.limit {
                body.tooLarge = true
                return 0
            }
            body.data.append(UnsafeRawPointer(data!).assumingMemoryBound(to: UInt8.self), count: length)
            return length
        }
        _ = wb_curl_setopt_pointer(curl, CURLOPT_WRITEDATA, Unmanaged.passUnretained(self).toOpaque())
    }
}
