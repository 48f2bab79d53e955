/// Who the client is, from the headers a trusted load balancer adds: `X-Forwarded-For`
/// (nginx's `$proxy_add_x_forwarded_for`, HAProxy's `option forwardfor`, AWS ALB,
/// Cloudflare) and `Forwarded` (RFC 7239 `for=`). A pure decoder of peer bytes, fuzzed.
///
/// Each proxy appends the address it received the request from, so the list is read from
/// the right: hops that are themselves trusted proxies are skipped, and the first address
/// that is not is the client (all trusted: the leftmost). Whatever lies left of it was
/// written by the client and is never looked at, so a forged leftmost value changes
/// nothing. Only requests whose peer is trusted are read at all (`TrustedProxies`).
///
/// A malformed hop reached by the walk makes the header worthless (`ignored`: the peer is
/// the client), and so do the two headers naming different clients — a client may add the
/// one its balancer does not manage, so neither can be believed over the other.
public enum ForwardedFor {
    /// What a request's forwarding headers say about its client.
    public enum Verdict: Equatable, Sendable {
        /// No forwarding header: the peer is the client.
        case absent
        /// The client: an address as canonical text, or an RFC 7239 identifier
        /// (`unknown`, an obfuscated `_name`), which per-client limits count as one client.
        case client(String)
        /// Malformed, or the two headers disagree: the peer is the client (counted).
        case ignored
    }

    /// A hop a header names.
    enum Node: Equatable {
        case address(IPAddress)
        case identifier(String)
    }

    /// Hops read before a chain counts as malformed (real chains have a handful).
    static let maximumHops = 32

    /// The client of a request whose peer is a trusted proxy, by its headers.
    public static func client(_ headers: HTTPHeaders, trusted: TrustedProxies) -> Verdict {
        let forwardedFor = headers.values("X-Forwarded-For"), forwarded = headers.values("Forwarded")
        let fromXFF = forwardedFor.isEmpty ? Verdict.absent : walk(xForwardedFor(forwardedFor.joined(separator: ",")), trusted)
        let fromForwarded = forwarded.isEmpty ? Verdict.absent : walk(self.forwarded(forwarded.joined(separator: ",")), trusted)
        switch (fromXFF, fromForwarded) {
        case (.absent, let verdict), (let verdict, .absent): return verdict
        case (.client(let a), .client(let b)) where a == b: return .client(a)
        default: return .ignored
        }
    }

    /// Walks hops given right to left (nil: a hop that does not parse).
    static func walk(_ hops: some Sequence<Node?>, _ trusted: TrustedProxies) -> Verdict {
        var leftmost: String?
        var count = 0
        for hop in hops {
            count += 1
            guard count <= maximumHops, let hop else { return .ignored }
            switch hop {
            case .identifier(let name):
                return .client(name)
            case .address(let address):
                guard trusted.contains(address) else { return .client(address.text) }
                leftmost = address.text
            }
        }
        return leftmost.map(Verdict.client) ?? .ignored
    }

    // MARK: X-Forwarded-For

    /// `X-Forwarded-For`'s hops, right to left, each parsed only when the walk reaches it:
    /// `203.0.113.7`, `2001:db8::1`, `[2001:db8::1]:4711`, `203.0.113.7:4711`, `unknown`.
    /// Empty list elements are skipped (RFC 9110 §5.6.1).
    static func xForwardedFor(_ value: String) -> some Sequence<Node?> {
        value.utf8.split(separator: UInt8(ascii: ","), omittingEmptySubsequences: false).reversed().lazy
            .map { Substring($0).trimmingSpaces() }
            .filter { !$0.isEmpty }
            .map { element -> Node? in
                if element.caseInsensitiveEquals("unknown") { return .identifier("unknown") }
                return address(element).map(Node.address)
            }
    }

    /// A bare address, or one with a port (`[v6]:port`, `v4:port`).
    private static func address(_ text: Substring) -> IPAddress? {
        if text.hasPrefix("[") {
            guard let close = text.firstIndex(of: "]") else { return nil }
            let rest = text[text.index(after: close)...]
            guard rest.isEmpty || (rest.hasPrefix(":") && isPort(rest.dropFirst())),
                  let address = IPAddress(text[text.index(after: text.startIndex)..<close]), address.bytes.count == 16
            else { return nil }
            return address
        }
        if let address = IPAddress(text) { return address }
        guard let colon = text.lastIndex(of: ":"), isPort(text[text.index(after: colon)...]),
              let address = IPAddress(text[..<colon]), address.bytes.count == 4 else { return nil }
        return address
    }

    private static func isPort(_ text: Substring) -> Bool {
        guard (1...5).contains(text.utf8.count), text.utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }), let value = Int(text)
        else { return false }
        return value <= 65535
    }

    // MARK: Forwarded (RFC 7239)

    /// `Forwarded`'s `for=` hops, right to left; a header that does not parse as a whole
    /// (quoting is read left to right) is one malformed hop. An element needs exactly one
    /// `for` parameter.
    static func forwarded(_ value: String) -> [Node?] {
        guard let elements = ForwardedElements.parse(Array(value.utf8)) else { return [nil] }
        return elements.reversed().map { pairs in
            let fors = pairs.filter { $0.name.caseInsensitiveEquals("for") }
            guard fors.count == 1 else { return nil }
            return node(fors[0].value)
        }
    }

    /// An RFC 7239 §6 node: `192.0.2.43`, `"[2001:db8:cafe::17]:4711"`, `unknown`, `_hidden`,
    /// each with an optional port (digits or an obfuscated `_port`).
    static func node(_ text: Substring) -> Node? {
        var name = text
        if text.hasPrefix("[") {
            guard let close = text.firstIndex(of: "]") else { return nil }
            name = text[...close]
            let rest = text[text.index(after: close)...]
            guard rest.isEmpty || (rest.hasPrefix(":") && isNodePort(rest.dropFirst())) else { return nil }
            guard let address = IPAddress(name.dropFirst().dropLast()), address.bytes.count == 16 else { return nil }
            return .address(address)
        }
        if let colon = text.firstIndex(of: ":") {
            guard isNodePort(text[text.index(after: colon)...]) else { return nil }
            name = text[..<colon]
        }
        if name.caseInsensitiveEquals("unknown") { return .identifier("unknown") }
        if isObfuscated(name) { return .identifier(String(name)) }
        guard let address = IPAddress(name), address.bytes.count == 4 else { return nil }
        return .address(address)
    }

    private static func isNodePort(_ text: Substring) -> Bool { isPort(text) || isObfuscated(text) }

    /// `"_" 1*(ALPHA / DIGIT / "." / "_" / "-")`.
    private static func isObfuscated(_ text: Substring) -> Bool {
        text.utf8.count >= 2 && text.utf8.count <= 64 && text.utf8.first == UInt8(ascii: "_") && text.utf8.allSatisfy {
            ($0 | 0x20 >= 0x61 && $0 | 0x20 <= 0x7A) || ($0 >= 0x30 && $0 <= 0x39) || $0 == 0x2E || $0 == 0x5F || $0 == 0x2D
        }
    }
}
