/// One notification as the server delivered it.
public struct PGNotification: Sendable, Equatable {
    /// The channel, exactly as given to NOTIFY / pg_notify (case and quotes preserved).
    public let channel: String
    /// The payload text ("" when none).
    public let payload: String
    /// The backend process id of the notifying session.
    public let pid: Int32

    /// Creates a notification value.
    public init(channel: String, payload: String, pid: Int32) {
        self.channel = channel
        self.payload = payload
        self.pid = pid
    }
}

/// What a listener consumer receives.
public enum PGListenerEvent: Sendable, Equatable {
    /// A notification on one of the consumer's channels.
    case notification(PGNotification)
    /// LISTEN is (again) active for every channel of the consumer, and notifications may
    /// have been missed before this point (first start, reconnect, or a buffer overflow):
    /// re-read the tables the notifications are about.
    case resync
}
