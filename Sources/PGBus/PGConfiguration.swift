import CLibPQ

/// Where and how to connect: a `postgresql://` URL or a `key=value` conninfo string, plus
/// the settings PGBus always applies.
///
/// libpq parses the URL or conninfo itself; PGBus adds `application_name`, a connect
/// timeout, TCP keepalives and `tcp_user_timeout` (so a dead host is noticed in seconds,
/// not the kernel's ~15 minutes), and fixes the session's DateStyle, TimeZone and float
/// precision so that values decode the same everywhere. Every statement also has a
/// deadline (`callTimeout`): a server that hangs with its TCP connection open (stalled
/// storage, a stopped process, a partition that still ACKs) fails the statement with
/// `timedOut` and the connection is abandoned, never waited for.
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
    /// Milliseconds sent data may stay unacknowledged before the kernel drops the
    /// connection (`tcp_user_timeout`; 0: the kernel's default).
    public var tcpUserTimeoutMilliseconds: Int
    /// How long a statement may go unanswered from the moment it is sent; past it the
    /// statement fails with `timedOut` and its connection is closed (nil: no deadline).
    public var callTimeout: Duration?

    /// Default connect timeout, per host of a multi-host URL: long enough for a cold TLS
    /// handshake, short enough to move on to the next host.
    public static let defaultConnectTimeoutSeconds = 5
    /// Default keepalive idle time: with the interval and count below, a silent dead peer
    /// is noticed in about 11 s.
    public static let defaultKeepaliveIdleSeconds = 5
    /// Default keepalive probe interval.
    public static let defaultKeepaliveIntervalSeconds = 2
    /// Default number of unanswered probes.
    public static let defaultKeepaliveCount = 3
    /// Default unacknowledged-data limit: 10 s.
    public static let defaultTCPUserTimeoutMilliseconds = 10_000
    /// Default statement deadline: the relay's calls take milliseconds; 5 s is a hang.
    public static let defaultCallTimeout: Duration = .seconds(5)

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
        self.tcpUserTimeoutMilliseconds = Self.defaultTCPUserTimeoutMilliseconds
        self.callTimeout = Self.defaultCallTimeout
    }

    /// Whether libpq can read the URL or conninfo at all: one it cannot is a setting to fix,
    /// not an outage to wait out. (Why not is not said: libpq's message quotes the input,
    /// which may hold a password.)
    public var isParsable: Bool {
        var error: UnsafeMutablePointer<CChar>?
        guard let options = PQconninfoParse(connectionString, &error) else {
            if let error { PQfreemem(error) }
            return false
        }
        PQconninfoFree(options)
        return true
    }

    /// Where it connects, for operators (`127.0.0.1:54322`, `db.example.com:5432`, several
    /// hosts comma-separated): the host and port of the URL or conninfo, never a user name
    /// or password. `unparsable settings` when libpq cannot read them.
    public var endpoint: String {
        var error: UnsafeMutablePointer<CChar>?
        guard let options = PQconninfoParse(connectionString, &error) else {
            if let error { PQfreemem(error) }
            return "unparsable settings"
        }
        defer { PQconninfoFree(options) }
        var values: [String: String] = [:]
        var option = options
        while let keyword = option.pointee.keyword {
            if let value = option.pointee.val { values[String(cString: keyword)] = String(cString: value) }
            option += 1
        }
        let hosts = (values["host"] ?? values["hostaddr"] ?? "localhost").split(separator: ",", omittingEmptySubsequences: false)
        let ports = (values["port"] ?? "5432").split(separator: ",", omittingEmptySubsequences: false)
        return hosts.enumerated().map { index, host in
            let port = ports.count == hosts.count ? ports[index] : ports.first ?? "5432"
            let name = host.hasPrefix("/") ? "socket " + host : (host.contains(":") ? "[\(host)]" : String(host))
            return "\(name):\(port.isEmpty ? "5432" : port)"
        }.joined(separator: ",")
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
            ("tcp_user_timeout", String(tcpUserTimeoutMilliseconds)),
            ("options", "-c DateStyle=ISO -c TimeZone=UTC -c extra_float_digits=3"),
            ("client_encoding", "UTF8"),
            ("dbname", connectionString),
        ]
    }
}
