/// Relay: the Whereabot relay — agent credentials, the locate coordinator, device sessions,
/// MCP and push — built on PGBus (Postgres as the only shared state and bus) and HTTPServer.
///
/// Shape of one instance (`RelayService` creates the parts bottom-up; each knows only the
/// parts below it):
/// - `LocateCoordinator` is the waiting side. It executes `WaiterState` (Instance/), one value
///   holding every waiting call's step, answer and timer; a call's database results are
///   events too. Where a request's ping goes is its caller's business
///   (`LocateCoordinator.Pinging`).
/// - `DeviceHub` is the phones' side. It executes `InstanceState` (Instance/), one value
///   holding every socket's state, ping, held answer and batch. That value takes events
///   (frames, closes, notifications, timers and the instance's own database results) and
///   returns actions.
/// - `RelayBus` feeds notifications down to both; `RelayMaintenance` beats, reaps and resyncs.
///
/// No part scans all sockets on a timer: deadlines are timers set when they are known.
public enum Relay {
    /// The version `whereabot version` prints and `/healthz` reports.
    public static let version = "0.1.0"
}
