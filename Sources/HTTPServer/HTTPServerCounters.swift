import Synchronization

/// Counters a server keeps for its owner's metrics, readable from any thread. Made by the
/// owner and handed to the server, so that whoever renders metrics needs no server.
public final class HTTPServerCounters: Sendable {
    private let forwardedIgnored = Atomic<Int>(0)

    /// Creates zeroed counters.
    public init() {}

    /// Requests from a trusted proxy whose `X-Forwarded-For` / `Forwarded` was malformed, or
    /// whose two headers named different clients: the peer counted as the client.
    public var forwardedHeadersIgnored: Int { forwardedIgnored.load(ordering: .relaxed) }

    func countForwardedHeaderIgnored() { forwardedIgnored.add(1, ordering: .relaxed) }
}
