import Foundation

/// How often a phone may ask its account for something (`PhoneAccountRequest`: a list, a
/// setting, a key): each request is a database call, and some cost more than others (eight
/// quiet-hours windows, a Stop all sharing). Counted per socket and per account, so neither
/// one busy socket nor an account's many sockets can keep the instance's pool busy for
/// everyone else; past either budget the request is answered `too_many` with how long to
/// wait, and nothing reaches the database. A phone's app asks a handful at a time (its
/// lists after its hello, one change per tap), well inside both.
///
/// A value type driven by its owner with an injected clock; bounded, as every `TokenBuckets`.
struct SettingsBudget: Sendable {
    /// Requests one socket may make at once, and per second after that.
    static let socketBurst: Double = 10, socketPerSecond: Double = 1
    /// Requests one account may make at once over all its sockets here, and per second.
    static let accountBurst: Double = 20, accountPerSecond: Double = 2

    private var sockets: TokenBuckets
    private var accounts: TokenBuckets

    /// A budget tracking at most `capacity` sockets and `capacity` accounts (a closed
    /// socket's bucket stays until it is full again and the table needs room).
    init(capacity: Int = TokenBuckets.defaultCapacity) {
        sockets = TokenBuckets(burst: Self.socketBurst, perSecond: Self.socketPerSecond, capacity: capacity)
        accounts = TokenBuckets(burst: Self.accountBurst, perSecond: Self.accountPerSecond, capacity: capacity)
    }

    /// Sockets and accounts tracked now.
    var count: Int { sockets.count + accounts.count }

    /// Takes one request of socket `connection` of account `user` at `now`: 0 when it may go
    /// ahead, else the seconds to wait (nothing is taken then).
    mutating func take(connection: UUID, user: UUID, now: TimeInterval) -> Int {
        let socket = connection.uuidString, account = user.uuidString
        let wait = max(sockets.retryAfter(socket, now: now), accounts.retryAfter(account, now: now))
        guard wait == 0 else { return wait }
        sockets.record(socket, now: now)
        accounts.record(account, now: now)
        return 0
    }

    /// The reply to a request over budget.
    static func refusal(retryAfter seconds: Int) -> String {
        #"{"type":"error","reason":"too_many","retry_after_s":\#(seconds),"message":"Too many changes at once; try again in \#(seconds) s."}"#
    }
}
