import Foundation
import HTTPServer
import JSON

/// The browser phone's files at `/app/` (docs/protocol.md, "Files and routes"), read once from the resource
/// bundle,
/// and `/app/config.json`. Every response carries the page's CSP, nosniff and no-referrer;
/// `index.html`, `sw.js` and `config.json` are `no-cache`. Unknown files are 404.
struct AppRoutes: Sendable {
    /// One file: its bytes and content type.
    struct File: Sendable {
        let body: [UInt8]
        let contentType: String
        let noCache: Bool
    }

    private let files: [String: File]
    private let config: [UInt8]
    private let securityHeaders: HTTPHeaders

    /// Loads the files (from `directory`, APP_DIR, when given: a checkout's
    /// Sources/Relay/Resources/app while working on the page; else the resource bundle);
    /// `supabaseURL` joins the CSP's `connect-src` (the page signs in there).
    init(publicURL: String, supabaseURL: String?, supabaseAnonKey: String?, vapidPublicKey: String?, allowForSeconds: Int = 3600,
         directory: URL? = nil) {
        var files: [String: File] = [:]
        if let directory = directory ?? Bundle.module.url(forResource: "app", withExtension: nil),
           let names = try? FileManager.default.contentsOfDirectory(atPath: directory.path) {
            for name in names {
                guard let type = Self.contentTypes[(name as NSString).pathExtension],
                      let data = FileManager.default.contents(atPath: directory.appendingPathComponent(name).path) else { continue }
                files[name] = File(body: Array(data), contentType: type,
                                   noCache: name == "index.html" || name == "consent.html" || name == "sw.js")
            }
        }
        self.files = files
        let object: JSONValue = ["vapid_public_key": JSONValue(vapidPublicKey), "supabase_url": JSONValue(supabaseURL),
                                 "supabase_anon_key": JSONValue(supabaseAnonKey), "public_url": .string(publicURL),
                                 "allow_for_s": JSONValue(Int64(allowForSeconds))]
        config = object.bytes
        let connect = ["'self'", supabaseURL].compactMap { $0 }.joined(separator: " ")
        securityHeaders = [
            "Content-Security-Policy": "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
                + "connect-src \(connect); worker-src 'self'; frame-ancestors 'none'; base-uri 'none'",
            "X-Content-Type-Options": "nosniff",
            "Referrer-Policy": "no-referrer",
        ]
    }

    static let contentTypes = ["html": "text/html; charset=utf-8", "js": "text/javascript; charset=utf-8",
                               "css": "text/css; charset=utf-8", "webmanifest": "application/manifest+json",
                               "png": "image/png", "json": "application/json"]

    /// Where Supabase Auth sends a person to consent to an OAuth client (set the project's
    /// `authorization_url_path` to it).
    static let consentPath = "/app/oauth/consent"

    /// Whether this route serves `path`.
    static func handles(_ path: String) -> Bool { path == "/app" || path.hasPrefix("/app/") }

    /// The response for a GET (or HEAD) of `path` under /app. A HEAD gets the GET's response:
    /// the server drops the body and keeps its Content-Length (RFC 9110 §9.3.2).
    func response(method: String, path: String) -> HTTPResponse {
        guard RelayRoutes.Route.app.allows(method) else { return RelayRoutes.Route.app.methodNotAllowed }
        if path == "/app" { return HTTPResponse(status: 301, headers: ["Location": "/app/"]) }
        // The OAuth consent page (docs/protocol.md, "Sign-in").
        let name = path == "/app/" ? "index.html" : path == Self.consentPath ? "consent.html" : String(path.dropFirst("/app/".count))
        var headers = securityHeaders
        if name == "config.json" {
            headers.set("Content-Type", "application/json")
            headers.set("Cache-Control", "no-cache")
            return HTTPResponse(status: 200, headers: headers, body: config)
        }
        guard !name.contains("/"), let file = files[name] else { return HTTPResponse(status: 404, headers: headers, body: Array("Not Found".utf8)) }
        headers.set("Content-Type", file.contentType)
        if file.noCache { headers.set("Cache-Control", "no-cache") }
        return HTTPResponse(status: 200, headers: headers, body: file.body)
    }

    /// How many files were loaded (0 means the resource bundle is missing).
    var fileCount: Int { files.count }
}
