/// Where and how to connect: a `postgresql://` URL or a `key=value` conninfo string, plus
/// the settings PGBus always applies.
///
/// libpq parses the URL or conninfo itself; PGBus adds `application_name`, a connect
/// timeout and TCP keepalives (so a dead peer is noticed), and fixes the session's
/// DateStyle, TimeZone and float precision so that values decode the same everywhere.
public struct PGConfiguration: Sendable {
    /// The URL or conninfo as given; it may hold a password, so never log it.
    public var connectionString: String
    /// Shown in `pg_stat_activity.application_name`.
    public var applicationName: String
    /// Seconds libpq waits for a connection to be made.
    public var connectTimeoutSeconds: Int
    /// Seconds of idleness before the first TCP keepalive probe.
    public var keepaliveIdleSeconds: Int
    /// Seconds between keepalive probes.
    public var keepaliveIntervalSeconds: Int
    /// Unanswered probes before the connection is considered dead.
    public var keepaliveCount: Int

    /// Default connect timeout: long enough for a cold TLS handshake, short enough to retry.
    public static let defaultConnectTimeoutSeconds = 10
    /// Default keepalive idle time: a dead peer is noticed in about a minute.
    public static let defaultKeepaliveIdleSeconds = 30
    /// Default keepalive probe interval.
    public static let defaultKeepaliveIntervalSeconds = 10
    /// Default number of unanswered probes.
    public static let defaultKeepaliveCount = 3

    /// Creates a configuration from a `postgresql://` URL or a conninfo string.
    /// - Parameters:
    ///   - connectionString: the URL or conninfo (never logged).
    ///   - applicationName: the name the server shows for these connections.
    public init(_ connectionString: String, applicationName: String = "pgbus") {
        self.connectionString = connectionString
        self.applicationName = applicationName
        self.connectTimeoutSeconds = Self.defaultConnectTimeoutSeconds
        self.keepaliveIdleSeconds = Self.defaultKeepaliveIdleSeconds
        self.keepaliveIntervalSeconds = Self.defaultKeepaliveIntervalSeconds
        self.keepaliveCount = Self.defaultKeepaliveCount
    }

    /// The keyword/value pairs handed to `PQconnectdbParams` with `expand_dbname`: the
    /// defaults come first, so anything the URL or conninfo sets itself wins.
    var libpqParameters: [(String, String)] {
        [
            ("application_name", applicationName),
            ("connect_timeout", String(connectTimeoutSeconds)),
            ("keepalives", "1"),
            ("keepalives_idle", String(keepaliveIdleSeconds)),
            ("keepalives_interval", String(keepaliveIntervalSeconds)),
            ("keepalives_count", String(keepaliveCount)),
            ("options", "-c DateStyle=ISO -c TimeZone=UTC -c extra_float_digits=3"),
            ("client_encoding", "UTF8"),
            ("dbname", connectionString),
        ]
    }
}
