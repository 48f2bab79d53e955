// libFuzzer entry for the forwarding headers a load balancer adds (X-Forwarded-For and
// RFC 7239 Forwarded) and for TRUSTED_PROXIES lists: the input is split at its first NUL
// into an X-Forwarded-For value and a Forwarded value (either may be absent). Any crash,
// hang or sanitizer report is a bug, and so is a verdict that breaks the walk's promises: a
// client that is not canonical text, or one that comes from the left of the client found
// when only the rightmost element is read.
@testable import HTTPServer

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzForwardedFor(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let bytes = Array(UnsafeBufferPointer(start: data, count: size))
    let cut = bytes.firstIndex(of: 0) ?? bytes.count
    let xff = String(decoding: bytes[..<cut], as: UTF8.self)
    let forwarded = cut < bytes.count ? String(decoding: bytes[(cut + 1)...], as: UTF8.self) : nil
    _ = try? TrustedProxies(xff)
    let trusted = try! TrustedProxies("127.0.0.0/8, 10.0.0.0/8, 2001:db8::/32")
    var headers = HTTPHeaders()
    if !xff.isEmpty { headers.add("X-Forwarded-For", xff) }
    if let forwarded { headers.add("Forwarded", forwarded) }
    let verdict = ForwardedFor.client(headers, trusted: trusted)
    if case .client(let client) = verdict {
        precondition(!client.isEmpty && client.utf8.count <= 64, "a client as short text")
        if let address = IPAddress(client) { precondition(address.text == client, "an address in its canonical text") }
        // The failed-credential budget counts an IPv6 client by its /64, any other as itself.
        let budget = AddressBudget.key(for: client)
        precondition(AddressBudget.key(for: budget) == budget && budget.utf8.count <= 64, "a budget key is short and stable")
    }
    if forwarded == nil, !xff.isEmpty {
        // Whatever a client writes left of an untrusted rightmost address never matters.
        var rightmost = HTTPHeaders()
        rightmost.add("X-Forwarded-For", "garbage\"[, " + xff)
        if case .client(let client) = verdict, let address = IPAddress(client), !trusted.contains(address) {
            precondition(ForwardedFor.client(rightmost, trusted: trusted) == verdict, "the left part changed the client")
        }
    }
    precondition(ForwardedFor.client(headers, trusted: trusted) == verdict, "the same headers, the same client")
    return 0
}
