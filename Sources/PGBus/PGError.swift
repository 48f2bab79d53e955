/// An error from PGBus, with a stable code and the server's SQLSTATE when there is one.
///
/// `description` is deliberately generic: it names the code and SQLSTATE but never the SQL
/// text, parameter values or the server's message (which can quote data, such as the
/// duplicate key of a unique violation). Those go to `debugDescription` only, for local
/// debugging; never log it in production.
public struct PGError: Error, Sendable, Equatable, CustomStringConvertible, CustomDebugStringConvertible {
    /// What kind of failure this is; stable across releases.
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        /// The stable name of the code.
        public let name: String

        /// Connecting failed (refused, unreachable, bad credentials, timeout).
        public static let connectionFailed = Code(name: "connectionFailed")
        /// The connection broke or was closed while in use.
        public static let connectionClosed = Code(name: "connectionClosed")
        /// The server answered with an error; `sqlState` says which.
        public static let server = Code(name: "server")
        /// A value could not be decoded into the requested Swift type.
        public static let decoding = Code(name: "decoding")
        /// A column name or index does not exist in the row.
        public static let noSuchColumn = Code(name: "noSuchColumn")
        /// A NOTIFY payload of 8000 bytes or more (PostgreSQL's limit).
        public static let payloadTooLarge = Code(name: "payloadTooLarge")
        /// A pool had no connection free before the acquire timeout.
        public static let poolTimeout = Code(name: "poolTimeout")
        /// A statement got no answer by its deadline (`PGConfiguration.callTimeout`): the
        /// server hangs or the network lost it. The connection was abandoned.
        public static let timedOut = Code(name: "timedOut")
        /// The pool or listener was shut down.
        public static let shutDown = Code(name: "shutDown")
        /// The configuration (URL or conninfo) could not be used.
        public static let invalidConfiguration = Code(name: "invalidConfiguration")
        /// The server sent something PGBus did not expect (for example, several result sets).
        public static let protocolViolation = Code(name: "protocolViolation")

        public var description: String { name }
    }

    /// The stable code.
    public let code: Code
    /// The five-character SQLSTATE for server errors (for example `23505`), else nil.
    public let sqlState: String?
    /// The server's or libpq's message; may quote data, so only `debugDescription` shows it.
    let detail: String?
    /// The server's primary message alone (without severity or context): for a function's
    /// own refusal of a caller's input, the sentence to show that caller. It may quote the
    /// input, so it goes only back to whoever sent it, never to logs.
    public let primaryMessage: String?

    /// Creates an error; `detail` is kept out of `description`.
    public init(_ code: Code, sqlState: String? = nil, detail: String? = nil, primaryMessage: String? = nil) {
        self.code = code
        self.sqlState = sqlState
        self.detail = detail
        self.primaryMessage = primaryMessage
    }

    public var description: String {
        if let sqlState { return "PGError(\(code), sqlstate \(sqlState))" }
        return "PGError(\(code))"
    }

    public var debugDescription: String {
        description + (detail.map { ": " + $0 } ?? "")
    }

    /// True for 23505 (unique_violation).
    public var isUniqueViolation: Bool { sqlState == SQLState.uniqueViolation }
    /// True for 42501 (insufficient_privilege, also RLS violations).
    public var isInsufficientPrivilege: Bool { sqlState == SQLState.insufficientPrivilege }
    /// True for 57014 (query_canceled: cancel request or statement_timeout).
    public var isQueryCanceled: Bool { sqlState == SQLState.queryCanceled }

    public static func == (lhs: PGError, rhs: PGError) -> Bool {
        lhs.code == rhs.code && lhs.sqlState == rhs.sqlState
    }
}

/// SQLSTATE values PGBus users commonly test for (PostgreSQL Appendix A).
public enum SQLState {
    /// 23505: a unique constraint was violated.
    public static let uniqueViolation = "23505"
    /// 42501: permission denied, including row-level security violations.
    public static let insufficientPrivilege = "42501"
    /// 57014: the statement was cancelled.
    public static let queryCanceled = "57014"
    /// 22023: a function refused an argument.
    public static let invalidParameterValue = "22023"
    /// 40001: serialization failure; retry the transaction.
    public static let serializationFailure = "40001"
    /// 57P01: the server is shutting down or the backend was terminated.
    public static let adminShutdown = "57P01"
}
