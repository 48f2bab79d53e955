/// Relay: the Whereabot relay — agent credentials, the instance driver, device sessions,
/// MCP and push — built on PGBus (Postgres as the only shared state and bus) and HTTPServer.
///
/// Shape of one instance (`RelayService` creates the parts bottom-up; each knows only the
/// parts below it):
/// - `InstanceDriver` is the instance's one executor (Instance/). It holds two values and
///   performs the actions they return: `WaiterState`, every waiting call's step, answer and
///   timer (a call's database results are events too), and `InstanceState`, every socket's
///   state, ping, held answer and batch (frames, closes, notifications, timers and the
///   phones' database results are its events). A request opened here pings the phones here,
///   and a phone's answer here reaches the call waiting here, without leaving the actor.
/// - `RelayBus` feeds notifications to it; `RelayMaintenance` beats, reaps and resyncs.
///
/// No part scans all sockets on a timer: deadlines are timers set when they are known.
public enum Relay {
    /// The version `whereabot version` prints and `/healthz` reports.
    public static let version = "0.1.0"
}
