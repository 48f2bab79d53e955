import Foundation
import JSON
import PGBus
import Synchronization

/// JSON-line logs on stderr (or any sink), one object per line with `time`, `level`,
/// `event` (a stable name, listed in docs/operations.md, "Logs") and string fields.
///
/// Callers pass only ids, counts, states and error codes: never a token, key, SQL text or
/// coordinate. Every event at `warning` or above is also counted by name, so /metrics can
/// show failed I/O that nobody read in the logs.
public final class Logger: Sendable {
    /// How serious an event is; lines below the logger's level are dropped (still counted
    /// when at warning or above).
    public enum Level: Int, Sendable, Comparable, CaseIterable {
        /// Details for debugging (swallowed errors of expected kinds).
        case debug
        /// Normal life: started, listening, draining.
        case info
        /// A failure the relay recovered from (a database call failed, a socket misbehaved).
        case warning
        /// A failure that needs an operator.
        case error

        /// The name as written in lines and in LOG_LEVEL.
        public var name: String { ["debug", "info", "warning", "error"][rawValue] }

        /// Parses LOG_LEVEL (`debug`, `info`, `warning`/`warn`, `error`).
        public init?(name: String) {
            switch name.lowercased() {
            case "debug": self = .debug
            case "info": self = .info
            case "warning", "warn": self = .warning
            case "error": self = .error
            default: return nil
            }
        }

        public static func < (lhs: Level, rhs: Level) -> Bool { lhs.rawValue < rhs.rawValue }
    }

    /// The most distinct event names counted (names are constants, so this is only a bound).
    static let maximumCountedEvents = 256

    private let level: Level
    private let sink: @Sendable (String) -> Void
    private let counts = Mutex<[String: Int]>([:])

    /// Creates a logger writing lines at `level` and above to `sink` (stderr by default).
    public init(level: Level = .info, sink: @escaping @Sendable (String) -> Void = Logger.standardError) {
        self.level = level
        self.sink = sink
    }

    /// Writes one line to standard error, through `LogWriter.standardError` (never blocking
    /// the caller).
    public static let standardError: @Sendable (String) -> Void = { line in
        LogWriter.standardError.write(line)
    }

    /// The W3C trace context of the request being served (an MCP request's `_meta`
    /// `traceparent`): every line logged while it is set — in its task and the tasks and
    /// actors it calls — carries it as `traceparent`.
    @TaskLocal public static var traceparent: String?

    /// Runs `body` with no trace context. Work that serves many requests — a batched call,
    /// an executor's queue of actions, a timer, a push — is started from whichever request
    /// happened to trigger it, and a task inherits its creator's task-locals: without this,
    /// its log lines would carry that request's (an agent's, perhaps an attacker's) trace id.
    public static func untraced<T>(isolation: isolated (any Actor)? = #isolation,
                                   _ body: () async throws -> T) async rethrows -> T {
        try await $traceparent.withValue(nil, operation: body, isolation: isolation)
    }

    /// Logs `event` with `fields` at `level`.
    public func log(_ level: Level, _ event: String, _ fields: [String: String] = [:]) {
        if level >= .warning {
            counts.withLock { counts in
                if counts[event] != nil || counts.count < Self.maximumCountedEvents { counts[event, default: 0] += 1 }
            }
        }
        guard level >= self.level else { return }
        var object = fields
        if let traceparent = Self.traceparent { object["traceparent"] = traceparent }
        // A line's time leaves the process: the system's wall clock, which the lines of
        // every other process are stamped with too.
        object["time"] = RelayClock.system.date.formatted(.iso8601)
        object["level"] = level.name
        object["event"] = event
        sink(JSONValue.object(object.mapValues(JSONValue.string)).text)
    }

    /// Logs at debug.
    public func debug(_ event: String, _ fields: [String: String] = [:]) { log(.debug, event, fields) }
    /// Logs at info.
    public func info(_ event: String, _ fields: [String: String] = [:]) { log(.info, event, fields) }
    /// Logs at warning (and counts it).
    public func warning(_ event: String, _ fields: [String: String] = [:]) { log(.warning, event, fields) }
    /// Logs at error (and counts it).
    public func error(_ event: String, _ fields: [String: String] = [:]) { log(.error, event, fields) }

    /// A failed I/O call: logged at warning with the error's stable description (never its
    /// details, which may quote data) and counted.
    public func failure(_ event: String, _ error: any Error, _ fields: [String: String] = [:]) {
        var fields = fields
        fields["error"] = Self.code(of: error)
        log(.warning, event, fields)
    }

    /// Warnings and errors so far, by event name (for /metrics).
    public var failureCounts: [String: Int] { counts.withLock { $0 } }

    /// A short stable name for an error, without data: our own errors describe themselves
    /// generically (PGError names its code and SQLSTATE, AuthError its case); any other
    /// error is named by its type only, since its description may quote what it decoded.
    static func code(of error: any Error) -> String {
        switch error {
        case is CancellationError: "cancelled"
        case let error as PGError: error.description
        case let error as AuthError: error.description
        default: String(describing: type(of: error))
        }
    }
}
