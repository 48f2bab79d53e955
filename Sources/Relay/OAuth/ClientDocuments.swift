import Foundation
import JSON

/// Client ID metadata documents (CIMD): a `client_id` that is an https URL names the
/// document that describes the client. Fetched safely (`DocumentFetch`), checked (its
/// `client_id` must be its URL; redirect URIs, grant types and name as registration checks
/// them; no client secret), and kept per its `Cache-Control` between 5 minutes and 24
/// hours, in a bounded cache. At most `maximumInFlight` fetches run at once, each on a
/// thread of its own.
actor ClientDocuments {
    /// Shortest and longest time a document is kept.
    static let minimumCacheSeconds = 300
    static let maximumCacheSeconds = 86_400
    /// Documents kept before the cache is emptied.
    static let maximumEntries = 1_000
    /// Fetches running at once (more: "try again").
    static let maximumInFlight = 8
    /// Longest client id URL (the database's client_id bound).
    static let maximumURLLength = 255

    private let fetcher: DocumentFetch
    /// Where a cached document's age is read (the instance's clock).
    private let clock: RelayClock
    private var cache: [String: (client: OAuthClient, until: Date)] = [:]
    private var inFlight = 0

    init(fetcher: DocumentFetch, clock: RelayClock = .system) {
        self.fetcher = fetcher
        self.clock = clock
    }

    /// Whether `clientID` names a metadata document: an https URL with a host and a path
    /// other than `/`, no fragment, no user name, no `.` or `..` segments, at most 255
    /// characters (draft-ietf-oauth-client-id-metadata-document §3).
    static func isDocumentURL(_ clientID: String) -> Bool {
        guard clientID.utf8.count <= maximumURLLength, clientID.hasPrefix("https://"), !clientID.contains("#"),
              let url = URL(string: clientID), url.scheme == "https", let host = url.host, !host.isEmpty,
              url.user == nil, url.password == nil else { return false }
        let path = url.path
        guard !path.isEmpty, path != "/" else { return false }
        return !path.split(separator: "/", omittingEmptySubsequences: false).contains { $0 == "." || $0 == ".." }
    }

    /// The client the document at `url` describes, fetched or from the cache; the reason it
    /// cannot be used otherwise.
    func client(at url: String) async -> Result<OAuthClient, DocumentFetch.Failure> {
        if let cached = cache[url], clock.date < cached.until { return .success(cached.client) }
        guard Self.isDocumentURL(url), let parsed = URL(string: url) else {
            return .failure(DocumentFetch.Failure(reason: "it is not an https URL with a path"))
        }
        guard inFlight < Self.maximumInFlight else { return .failure(DocumentFetch.Failure(reason: "too many are being fetched")) }
        inFlight += 1
        defer { inFlight -= 1 }
        let fetched: DocumentFetch.Fetched
        switch await fetchOffLoop(parsed) {
        case .success(let value): fetched = value
        case .failure(let failure): return .failure(failure)
        }
        let client: OAuthClient
        switch Self.client(document: fetched.body, url: url) {
        case .success(let value): client = value
        case .failure(let failure): return .failure(failure)
        }
        let seconds = min(max(fetched.maxAge ?? 0, Self.minimumCacheSeconds), Self.maximumCacheSeconds)
        if cache.count >= Self.maximumEntries { cache.removeAll() }
        cache[url] = (client, clock.date.addingTimeInterval(TimeInterval(seconds)))
        return .success(client)
    }

    /// The client a fetched document describes, checked.
    static func client(document: Data, url: String) -> Result<OAuthClient, DocumentFetch.Failure> {
        guard let json = JSONValue.parse(bytes: Array(document)), case .object = json else {
            return .failure(DocumentFetch.Failure(reason: "it is not a JSON object"))
        }
        guard json["client_id"]?.string == url else {
            return .failure(DocumentFetch.Failure(reason: "its client_id is not its own URL"))
        }
        guard json["client_secret"] == nil else {
            return .failure(DocumentFetch.Failure(reason: "it holds a client secret"))
        }
        switch OAuthClient.fromMetadata(json, id: url, kind: .document, allowedMethods: [.none], defaultMethod: .none,
                                        secretDigest: { _ in nil }) {
        case .success(let client): return .success(client)
        case .failure(let refusal): return .failure(DocumentFetch.Failure(reason: refusal.description))
        }
    }

    private func fetchOffLoop(_ url: URL) async -> Result<DocumentFetch.Fetched, DocumentFetch.Failure> {
        let fetcher = self.fetcher
        return await withCheckedContinuation { continuation in
            let thread = Thread {
                continuation.resume(returning: Result { () throws(DocumentFetch.Failure) in try fetcher.fetch(url) })
            }
            thread.name = "cimd-fetch"
            thread.start()
        }
    }
}
