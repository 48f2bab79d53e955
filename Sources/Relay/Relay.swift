/// Relay: the Whereabot relay — agent credentials, the locate coordinator, device sessions,
/// MCP and push — built on PGBus (Postgres as the only shared state and bus) and HTTPServer.
public enum Relay {
    /// The version `whereabot version` prints and `/healthz` reports.
    public static let version = "0.1.0"
}
