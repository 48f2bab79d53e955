import CCurl
import CSystem
import Foundation
import Testing

/// The typed curl_easy_setopt wrappers reach libcurl (OpenSSL flavour).
@Suite struct CurlShimTests {
    /// Fetching a file:// URL through the wrappers delivers its bytes to the write callback.
    @Test func fetchesAFileThroughTheWriteCallback() throws {
        let path = FileManager.default.temporaryDirectory
            .appendingPathComponent("whereabot-curl-\(UUID().uuidString)").path
        try Data("hello from curl".utf8).write(to: URL(fileURLWithPath: path))
        defer { try? FileManager.default.removeItem(atPath: path) }

        final class Sink { var data = Data() }
        let sink = Sink()
        let curl = try #require(curl_easy_init())
        defer { curl_easy_cleanup(curl) }
        #expect(wb_curl_setopt_string(curl, CURLOPT_URL, "file://\(path)") == CURLE_OK)
        #expect(wb_curl_setopt_write_callback(curl, CURLOPT_WRITEFUNCTION) { data, size, count, user in
            let sink = Unmanaged<Sink>.fromOpaque(user!).takeUnretainedValue()
            sink.data.append(UnsafeRawPointer(data!).assumingMemoryBound(to: UInt8.self), count: size * count)
            return size * count
        } == CURLE_OK)
        #expect(wb_curl_setopt_pointer(curl, CURLOPT_WRITEDATA, Unmanaged.passUnretained(sink).toOpaque()) == CURLE_OK)
        #expect(curl_easy_perform(curl) == CURLE_OK)
        #expect(String(decoding: sink.data, as: UTF8.self) == "hello from curl")
    }

    /// The linked libcurl uses OpenSSL, as docs/architecture.md, "The modules" requires (APNs
    /// needs HTTP/2 too).
    @Test func libcurlIsTheOpenSSLFlavourWithHTTP2() throws {
        let info = try #require(wb_curl_version_info())
        let ssl = String(cString: info.pointee.ssl_version)
        #expect(ssl.hasPrefix("OpenSSL"))
        #expect(info.pointee.features & CURL_VERSION_HTTP2 != 0)
    }
}
