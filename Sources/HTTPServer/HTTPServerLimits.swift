/// Every bound the server enforces, with named defaults and the reason for each.
public struct HTTPServerLimits: Sendable {
    /// Request line bytes (method, target, version): 8 KiB, as most servers allow.
    public var maxStartLineBytes = 8 * 1024
    /// Request head bytes, start line and headers together: 16 KiB.
    public var maxHeaderBytes = 16 * 1024
    /// Header fields per request.
    public var maxHeaderCount = 100
    /// Request body bytes: 64 KiB; nothing the relay accepts is larger.
    public var maxBodyBytes = 64 * 1024
    /// WebSocket message bytes after reassembly: 64 KiB.
    public var maxWebSocketMessageBytes = 64 * 1024
    /// Time a client has to send a complete request head once it started (slowloris).
    public var headerReadTimeout: Duration = .seconds(10)
    /// Time an idle keep-alive connection stays open between requests.
    public var idleTimeout: Duration = .seconds(75)
    /// Bytes queued for a slow reader before its connection is closed.
    public var maxOutboundBytesPerConnection = 1024 * 1024
    /// Open connections (HTTP and WebSocket); new ones are refused beyond this.
    public var maxConnections = 100_000
    /// Interval between keep-alive pings on an idle WebSocket (mobile networks drop
    /// silent TCP connections after a few minutes; 30 s keeps NAT state alive).
    public var webSocketPingInterval: Duration = .seconds(30)
    /// Time without any frame from a WebSocket peer, after a ping, before it counts as dead.
    public var webSocketPongTimeout: Duration = .seconds(15)
    /// After an error response that ends the connection, how long unread input is drained
    /// (lingering close) so that the client reads the status instead of a reset.
    public var lingerTimeout: Duration = .seconds(2)
    /// The most bytes drained while lingering.
    public var maxLingerBytes = 256 * 1024
    /// How long accepting pauses when the process is out of file descriptors (EMFILE),
    /// instead of spinning on a listener that stays readable.
    public var acceptPauseOnEMFILE: Duration = .milliseconds(100)
    /// Descriptors kept free for everything but client connections (database, logs):
    /// the connection cap is at most the open-files limit minus this.
    public var reservedFileDescriptors = 64
    /// Time to wait for the peer's close frame after sending ours.
    public var closeHandshakeTimeout: Duration = .seconds(5)

    /// The defaults above.
    public init() {}
}
