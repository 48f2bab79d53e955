import HTTPServer

/// A phone socket refused after its upgrade: it closes at once with 1013 "try again later"
/// and the reason `retry after N` (seconds). A browser cannot read the status of a refused
/// upgrade — it sees only a failed socket and would fall back on its own back-off — so a
/// phone that speaks `whereabot.v1` is refused on the socket instead, where it can read how
/// long to wait (the browser phone and `whereabot phone` obey it).
public final class RetryLaterSocket: WebSocketDelegate {
    /// The close reason's prefix; the seconds follow.
    public static let reasonPrefix = "retry after "

    private let seconds: Int

    /// A socket that tells its phone to come back in `seconds` (1 to 3600).
    init(seconds: Int) {
        self.seconds = min(max(seconds, 1), 3600)
    }

    /// The refusal for a phone that speaks `whereabot.v1`, from the response it would have
    /// got before the upgrade (429 or 503 with `Retry-After`); nil for any other response.
    static func replacing(_ response: HTTPResponse) -> HTTPResponse? {
        guard response.status == 429 || response.status == 503,
              let seconds = response.headers["Retry-After"].flatMap({ Int($0) }) else { return nil }
        return .webSocket(headers: ["Sec-WebSocket-Protocol": DeviceCredential.protocolName],
                          delegate: RetryLaterSocket(seconds: seconds))
    }

    /// The seconds a 1013 close reason asks for (`retry after 5` → 5), nil for any other
    /// reason or a number outside 0 to 3600.
    public static func seconds(inReason reason: String) -> Int? {
        guard reason.hasPrefix(reasonPrefix), let seconds = Int(reason.dropFirst(reasonPrefix.count)) else { return nil }
        return (0...3600).contains(seconds) ? seconds : nil
    }

    public func webSocketDidOpen(_ socket: WebSocket) {
        socket.close(code: WebSocketCloseCode.tryAgainLater, reason: Self.reasonPrefix + String(seconds))
    }

    public func webSocket(_ socket: WebSocket, didReceive message: WebSocketMessage) {}

    public func webSocketDidClose(_ socket: WebSocket, code: UInt16, reason: String) {}
}
