import CCurl
import CSystem
import Foundation

/// A response body libcurl writes into, at most `limit` bytes: past it the transfer stops
/// (`tooLarge`), and the `Cache-Control` header's `max-age`. One per `HTTPGet` transfer,
/// which keeps it alive while it runs.
final class CurlBody {
    /// The most bytes kept.
    let limit: Int
    /// What arrived so far.
    private(set) var data = Data()
    /// Whether the body went past `limit` (the transfer was stopped).
    private(set) var tooLarge = false
    /// The response's `Cache-Control` `max-age` in seconds (0 for `no-store`/`no-cache`);
    /// nil without one.
    private(set) var maxAge: Int?

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
        _ = wb_curl_setopt_write_callback(curl, CURLOPT_HEADERFUNCTION) { data, size, count, user in
            let body = Unmanaged<CurlBody>.fromOpaque(user!).takeUnretainedValue()
            let line = String(decoding: UnsafeRawBufferPointer(start: data, count: size * count), as: UTF8.self)
            if line.lowercased().hasPrefix("cache-control:") { body.maxAge = CurlBody.maxAge(line) }
            return size * count
        }
        _ = wb_curl_setopt_pointer(curl, CURLOPT_HEADERDATA, Unmanaged.passUnretained(self).toOpaque())
    }

    /// `max-age` of a `Cache-Control` header line; nil without one, 0 for `no-store` or
    /// `no-cache`.
    static func maxAge(_ line: String) -> Int? {
        let value = line.drop { $0 != ":" }.dropFirst().lowercased()
        var age: Int?
        for directive in value.split(separator: ",") {
            let trimmed = directive.trimmingCharacters(in: .whitespacesAndNewlines)
            if trimmed == "no-store" || trimmed == "no-cache" { return 0 }
            if trimmed.hasPrefix("max-age="), let seconds = Int(trimmed.dropFirst(8)), seconds >= 0 { age = seconds }
        }
        return age
    }
}
