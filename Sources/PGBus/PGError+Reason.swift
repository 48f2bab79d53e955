extension PGError {
    /// A short phrase for operators saying why the database could not be used
    /// (`connection refused`, `timeout`, `authentication failed`, `read-only (a standby)`),
    /// for /readyz and log lines. It is chosen from a fixed list by what libpq or the
    /// server said, so it never quotes data, a password or SQL — unlike `debugDescription`.
    public var reason: String {
        switch code {
        case .connectionFailed: Self.connectReason(detail ?? "")
        case .connectionClosed: detail.map(Self.connectReason) ?? "connection lost"
        case .timedOut: "no answer within the call deadline"
        case .poolTimeout: "every connection busy"
        case .shutDown: "shut down"
        case .invalidConfiguration: "invalid connection settings"
        case .server:
            switch sqlState {
            case "25006": "read-only (a standby)"
            case "57P03": "starting up"
            case "57P01", "57P02": "shutting down"
            case "53300": "too many connections"
            case "28P01", "28000": "authentication failed"
            default: "server error \(sqlState ?? "")"
            }
        default: code.name
        }
    }

    /// libpq's connect messages, most specific first.
    private static let connectReasons: [(needle: String, reason: String)] = [
        ("Connection refused", "connection refused"),
        ("timeout expired", "timeout"),
        ("timed out", "timeout"),
        ("could not translate host name", "unknown host"),
        ("No route to host", "unreachable"),
        ("Network is unreachable", "unreachable"),
        ("password authentication failed", "authentication failed"),
        ("authentication failed", "authentication failed"),
        ("no pg_hba.conf entry", "refused by pg_hba.conf"),
        ("database system is starting up", "starting up"),
        ("database system is not yet accepting connections", "starting up"),
        ("database system is shutting down", "shutting down"),
        ("too many clients", "too many connections"),
        ("does not exist", "database or role does not exist"),
        ("read-only", "read-only (a standby)"),
        ("hot standby", "read-only (a standby)"),
        ("SSL", "TLS failed"),
        ("server closed the connection", "connection lost"),
        ("backing off", "backing off after failed connects"),
    ]

    private static func connectReason(_ detail: String) -> String {
        connectReasons.first { detail.contains($0.needle) }?.reason ?? "connection failed"
    }
}
