/// Relay: the Whereabot relay — agent credentials, the instance driver, device sessions,
/// MCP and push — built on PGBus (Postgres as the only shared state and bus) and HTTPServer.
///
/// Shape of one instance (`RelayService` creates the parts bottom-up; each knows only the
/// parts below it):
/// - `InstanceDriver` is the instance's one executor (Instance/). It holds one value,
///   RelayCore's `Instance` (the phones, the calls waiting here, the push plans), hands it
///   every event — a socket's frame or close, a notification, a timer, an agent's call, a
///   database result, a push claim — and performs the actions it returns, in one place
///   (`InstanceDriver+Perform.swift`). It keeps only continuations, timer handles and the
///   tasks of its calls; every decision is the value's.
/// - `RelayBus` feeds notifications to it; `RelayMaintenance` beats, reaps and resyncs.
///
/// No part scans all sockets on a timer: deadlines are timers set when they are known.
public enum Relay {
    /// The version `whereabot version` prints and `/healthz` reports.
    public static let version = "0.1.0"
}
