import Foundation

/// Redirect URIs as OAuth 2.1 and RFC 8252 allow them: `https`, loopback `http`
/// (`127.0.0.1`, `[::1]`, `localhost`: any port at authorization, RFC 8252 §7.3), or a
/// private-use scheme (`com.example.app:/callback`, RFC 8252 §7.1); never a fragment, a
/// user name or a script scheme.
enum RedirectURI {
    /// Longest redirect URI accepted.
    static let maximumLength = 2000
    private static let loopbackHosts: Set<String> = ["127.0.0.1", "[::1]", "localhost"]
    private static let neverSchemes: Set<String> = ["javascript", "data", "vbscript", "file", "blob", "about", "http", "https"]

    /// The grammar every registrable redirect URI matches (docs/openapi.yaml publishes it):
    /// a lowercase scheme, no fragment, no user name, a port from 1 to 65535, and only
    /// unreserved, sub-delimiter and percent characters after the authority.
    static let pattern = #"^(https://[A-Za-z0-9.-]+"# + port + #"|http://(127\.0\.0\.1|\[::1\]|localhost)"# + port
        + #"|[a-z][a-z0-9+-]*(\.[a-z0-9+-]+)+:)(/[A-Za-z0-9._~!$&'()*+,;=:@%/-]*)?(\?[A-Za-z0-9._~!$&'()*+,;=:@%/?-]*)?$"#
    private static let port = "(:([1-9][0-9]{0,3}|[1-5][0-9]{4}|6[0-4][0-9]{3}|65[0-4][0-9]{2}|655[0-2][0-9]|6553[0-5]))?"

    /// Whether a client may register `uri`.
    static func isRegistrable(_ uri: String) -> Bool {
        guard uri.utf8.count <= maximumLength, uri.range(of: pattern, options: .regularExpression) != nil,
              let parts = Parts(uri) else { return false }
        switch parts.scheme {
        case "https": return !parts.host.isEmpty
        case "http": return loopbackHosts.contains(parts.host)
        default:
            // A private-use scheme names its app by reversed domain (RFC 8252 §7.1).
            return parts.scheme.contains(".") && !neverSchemes.contains(parts.scheme)
        }
    }

    /// Whether `requested` is the registered URI: the same string, or — for a loopback
    /// `http` URI — the same but for the port.
    static func matches(registered: String, requested: String) -> Bool {
        if registered == requested { return isRegistrable(requested) }
        guard let a = Parts(registered), let b = Parts(requested), a.scheme == "http", b.scheme == "http",
              loopbackHosts.contains(a.host) else { return false }
        return a.host == b.host && a.rest == b.rest && isRegistrable(requested)
    }

    /// The host a person is shown for `uri` (its scheme for a private-use one).
    static func displayHost(_ uri: String) -> String {
        guard let parts = Parts(uri) else { return "" }
        return parts.host.isEmpty ? parts.scheme : parts.host + (parts.port.map { ":\($0)" } ?? "")
    }

    /// A URI split into what the rules look at: scheme, host, port and everything after.
    private struct Parts {
        let scheme: String
        let host: String
        let port: String?
        let rest: Substring

        init?(_ uri: String) {
            guard !uri.contains("#"), !uri.utf8.contains(where: { $0 <= 0x20 || $0 == 0x7F || $0 == 0x5C }),
                  let colon = uri.firstIndex(of: ":") else { return nil }
            let scheme = uri[..<colon].lowercased()
            guard let first = scheme.utf8.first, (0x61...0x7A).contains(first),
                  scheme.utf8.allSatisfy({ (0x61...0x7A).contains($0) || (0x30...0x39).contains($0) || $0 == 0x2B || $0 == 0x2D || $0 == 0x2E })
            else { return nil }
            self.scheme = scheme
            let afterScheme = uri[uri.index(after: colon)...]
            guard afterScheme.hasPrefix("//") else {
                guard scheme != "http", scheme != "https" else { return nil }
                host = ""
                port = nil
                rest = afterScheme
                return
            }
            let authorityAndRest = afterScheme.dropFirst(2)
            let end = authorityAndRest.firstIndex { $0 == "/" || $0 == "?" } ?? authorityAndRest.endIndex
            let authority = authorityAndRest[..<end]
            guard !authority.contains("@") else { return nil }
            rest = authorityAndRest[end...]
            if authority.hasPrefix("[") {
                guard let close = authority.firstIndex(of: "]") else { return nil }
                host = authority[...close].lowercased()
                let tail = authority[authority.index(after: close)...]
                guard tail.isEmpty || tail.hasPrefix(":") else { return nil }
                port = tail.isEmpty ? nil : String(tail.dropFirst())
            } else if let portColon = authority.lastIndex(of: ":") {
                host = authority[..<portColon].lowercased()
                port = String(authority[authority.index(after: portColon)...])
            } else {
                host = authority.lowercased()
                port = nil
            }
            if let port, port.isEmpty || port.utf8.count > 5 || !port.utf8.allSatisfy({ (0x30...0x39).contains($0) })
                || Int(port).map({ $0 > 65_535 }) ?? true { return nil }
        }
    }
}
