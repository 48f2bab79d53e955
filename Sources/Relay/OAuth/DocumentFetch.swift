import Fetch
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
        var get = HTTPGet(maximumBytes: Self.maximumBytes, timeoutMilliseconds: Self.timeoutMilliseconds)
        get.httpsOnly = true
        get.pins = ["\(host):\(url.port ?? 443):\(address)"]
        get.headers = ["Accept: application/json"]
        get.caBundle = caBundle
        let response: HTTPGet.Response
        do {
            response = try get.get(url.absoluteString)
        } catch {
            throw Failure(reason: Self.reason(error))
        }
        guard response.status == 200 else { throw Failure(reason: "it answered HTTP \(response.status)") }
        return Fetched(body: response.body, maxAge: response.maxAge)
    }

    private static func reason(_ failure: HTTPGet.Failure) -> String {
        switch failure {
        case .timeout: "it did not answer within 5 s"
        case .refused: "the connection was refused"
        case .tls: "its TLS certificate did not verify"
        case .unsupportedScheme: "it is not https"
        case .tooLarge: "it is larger than 5 KB"
        default: "the fetch failed"
        }
    }
}
