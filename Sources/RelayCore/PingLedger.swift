import Foundation

/// Which sockets got which ping, which of them answered, and which pings still need their
/// delivered mark — until the ping expires or is cancelled; and which requests ended here,
/// until their pings would have expired, so that a late locate for one of them (its
/// notification behind the settle, a resync after a Postgres crash) is not sent again. No
/// I/O: the driver asks it what to send and whom to cancel.
struct PingLedger {
    private struct Entry {
        let expires: Date
        /// The waiter's key to seal a fix to (from the database with the ping).
        let replyKey: [UInt8]?
        var connections: Set<UUID> = []
        var answered: Set<UUID> = []
    }

    private var entries: [UUID: Entry] = [:]
    /// Requests that ended here, with their pings' expiry.
    private var ended: [UUID: Date] = [:]

    /// Pings being tracked.
    var count: Int { entries.count }

    /// Records that `ping` goes to `connection`: true the first time (send it), false when
    /// that socket got it already (each socket gets each id once). `firstForRequest` is true
    /// when no socket here had it yet (it needs a delivered mark).
    mutating func send(_ ping: LocateMessage, to connection: UUID) -> (send: Bool, firstForRequest: Bool) {
        if ended[ping.id] != nil { return (false, false) }
        if entries[ping.id] == nil {
            entries[ping.id] = Entry(expires: Date(timeIntervalSince1970: TimeInterval(ping.expiresMs) / 1000),
                                     replyKey: ping.replyKey, connections: [connection])
            return (true, true)
        }
        return (entries[ping.id]!.connections.insert(connection).inserted, false)
    }

    /// `connection` answered `request`: it needs no cancel. The reply key comes back when
    /// that socket got the ping here (else the database is asked).
    mutating func answered(_ request: UUID, by connection: UUID) -> [UInt8]? {
        guard entries[request] != nil else { return nil }
        entries[request]!.answered.insert(connection)
        return entries[request]!.connections.contains(connection) ? entries[request]!.replyKey : nil
    }

    /// The request ended: the sockets that got its ping and did not answer it (they get a
    /// cancel); the ping is forgotten, and its id kept until the ping expires.
    mutating func end(_ request: UUID) -> Set<UUID> {
        guard let entry = entries.removeValue(forKey: request) else { return [] }
        ended[request] = entry.expires
        return entry.connections.subtracting(entry.answered)
    }

    /// Requests that ended here whose pings have not expired yet.
    var endedCount: Int { ended.count }

    /// Whether `request`'s ping is tracked here.
    func contains(_ request: UUID) -> Bool { entries[request] != nil }

    /// When `request`'s ping expires, if tracked.
    func expiry(of request: UUID) -> Date? { entries[request]?.expires }

    /// The reply key that came with `request`'s ping.
    func replyKey(of request: UUID) -> [UInt8]? { entries[request]?.replyKey }

    /// Forgets pings, and ended requests, past their expiry.
    mutating func forgetExpired(now: Date) {
        entries = entries.filter { $0.value.expires > now }
        ended = ended.filter { $0.value > now }
    }
}
