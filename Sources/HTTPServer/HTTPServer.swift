/// HTTPServer: a small, strict HTTP/1.1 and WebSocket (RFC 6455) server over epoll.
///
/// HTTPServer is reusable: it knows nothing of phones, tokens or locations. SPEC §7 of the
/// project explains why it is our own (no SwiftNIO; libwebsockets spins on pipelined bodies).
/// SHA-1 and random bytes come from OpenSSL, base64 from Foundation.
public enum HTTPServerModule {}
