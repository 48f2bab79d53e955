import Foundation

/// What the database answers, as the instance's values take it: the gateway
/// (`RelayDatabase`) maps its rows into these, so that `InstanceState` and `WaiterState`
/// depend on no executor or database type.
public enum RelayRows {
    /// One socket's hello, as `relay.device_hellos` takes it.
    public struct SocketHello: Sendable, Equatable {
        /// The socket (relay.connections.id).
        public let connection: UUID
        /// Its verified user and session.
        public let user: UUID, session: UUID
        /// What the phone said of itself (no app version: the database keeps its own).
        public let device: UUID, name: String, platform: String, appVersion: String?
        /// When the socket opened: of two sockets of one device, the later one wins.
        public let openedAt: Date

        /// Creates a hello.
        public init(connection: UUID, user: UUID, session: UUID, device: UUID, name: String, platform: String,
                    appVersion: String?, openedAt: Date) {
            self.connection = connection
            self.user = user
            self.session = session
            self.device = device
            self.name = name
            self.platform = platform
            self.appVersion = appVersion
            self.openedAt = openedAt
        }
    }

    /// What one batch of hellos did.
    public struct HelloBatch: Sendable {
        /// Each socket's status by connection.
        public var statuses: [UUID: RelayStatus.Hello]
        /// Sockets whose hello the database refused alone (a server error): "try again".
        public var failed: Set<UUID> = []
        /// The pings waiting for the users of the registered sockets, oldest first.
        public let pending: [(owner: UUID, ping: LocateMessage)]

        /// Creates one (the gateway maps its rows into these).
        package init(statuses: [UUID: RelayStatus.Hello], failed: Set<UUID> = [], pending: [(owner: UUID, ping: LocateMessage)]) {
            self.statuses = statuses
            self.failed = failed
            self.pending = pending
        }
    }

    /// What `openRequest` did.
    public struct Opened: Sendable, Equatable {
        /// Whether it opened.
        public let status: RelayStatus.Open
        /// Live sockets of the owner now (0: push at once).
        public let connections: Int?
        /// The ping for the owner's phones on the calling instance, which the database does
        /// not notify of its own request; nil when it holds none of them.
        public let ping: LocateMessage?
        /// For `quiet`: whose quiet hours, and until when.
        public var quiet: QuietHours? = nil

        /// Creates one (the gateway maps its rows into these).
        package init(status: RelayStatus.Open, connections: Int?, ping: LocateMessage?, quiet: QuietHours? = nil) {
            self.status = status
            self.connections = connections
            self.ping = ping
            self.quiet = quiet
        }
    }

    /// A quiet-hours window holding when a request was opened (docs/protocol.md, "Quiet hours").
    public struct QuietHours: Sendable, Equatable {
        /// The owner's display name.
        public let name: String
        /// When the window ends.
        public let until: Date
        /// That end as the owner's clock shows it (HH:MM).
        public let local: String

        /// Creates the window's end.
        public init(name: String, until: Date, local: String) {
            self.name = name
            self.until = until
            self.local = local
        }
    }

    /// What `finish` found.
    public struct Finished: Sendable, Equatable {
        /// Whether this call ended it.
        public let status: RelayStatus.Finish
        /// Whether any device got the ping.
        public let delivered: Bool?
        /// The recorded outcome.
        public let outcome: RelayStatus.Outcome?
        /// The recorded reason.
        public let reason: String?

        /// Creates one (the gateway maps its rows into these).
        package init(status: RelayStatus.Finish, delivered: Bool?, outcome: RelayStatus.Outcome?, reason: String?) {
            self.status = status
            self.delivered = delivered
            self.outcome = outcome
            self.reason = reason
        }
    }

    /// The row behind one of a waiter's requests, for resync.
    public struct RequestState: Sendable, Equatable {
        /// The request.
        public let id: UUID
        /// Whether it was settled (answered, expired or abandoned).
        public let settled: Bool
        /// How it ended, when settled.
        public let outcome: RelayStatus.Outcome?
        /// The reason, for denied and unavailable.
        public let reason: String?
        /// Whether any device got the ping.
        public let delivered: Bool

        /// Creates one (the gateway maps its rows into these).
        package init(id: UUID, settled: Bool, outcome: RelayStatus.Outcome?, reason: String?, delivered: Bool) {
            self.id = id
            self.settled = settled
            self.outcome = outcome
            self.reason = reason
            self.delivered = delivered
        }
    }
}
