import Foundation

/// The users whose hellos are waiting for or inside a `relay.device_hellos` call, and the
/// pings that arrived for them meanwhile: their sockets are not indexed yet, so a
/// notification finds nobody to send to, and the call's pending list may have been read
/// before the request committed. The kept pings are sent when the user's hello returns.
///
/// No I/O; bounded (`maximumPings` per user; users are bounded by the sockets).
struct HellosInFlight {
    /// The most pings kept per user (a user's waiting requests are capped far lower).
    static let maximumPings = 64

    private struct Entry {
        var hellos = 0
        var pings: [LocateMessage] = []
    }

    private var users: [UUID: Entry] = [:]

    /// A hello of `user` starts waiting.
    mutating func begin(_ user: UUID) {
        users[user, default: Entry()].hellos += 1
    }

    /// A ping for `owner` arrived: kept when a hello of theirs is in flight.
    mutating func keep(_ ping: LocateMessage, for owner: UUID) {
        guard users[owner] != nil, users[owner]!.pings.count < Self.maximumPings else { return }
        users[owner]!.pings.append(ping)
    }

    /// A hello of `user` came back: the pings kept for them meanwhile (kept for the user's
    /// other hellos still in flight).
    mutating func end(_ user: UUID) -> [LocateMessage] {
        guard var entry = users[user] else { return [] }
        entry.hellos -= 1
        users[user] = entry.hellos > 0 ? entry : nil
        if users.isEmpty, users.capacity > 64 { users = [:] }  // a surge's table is given back, a small one kept
        return entry.pings
    }

    /// Whether a hello of `user` is in flight.
    func contains(_ user: UUID) -> Bool { users[user] != nil }
}
