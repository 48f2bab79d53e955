import Dispatch
import Glibc

/// Runs an action when a process signal arrives (SIGTERM, SIGINT), on a dispatch queue
/// rather than in a signal handler, for graceful shutdown of a server.
public enum SignalHandler {
    /// Ignores the signal's default action and calls `action` each time it arrives; cancel
    /// the returned source to stop.
    public static func on(_ number: Int32, _ action: @escaping @Sendable () -> Void) -> DispatchSourceSignal {
        signal(number, SIG_IGN)
        let source = DispatchSource.makeSignalSource(signal: number, queue: .global())
        source.setEventHandler(handler: action)
        source.resume()
        return source
    }
}
