import Foundation
import Synchronization

/// The registered names of OAuth clients (`auth.oauth_clients.client_name`), shown on pings,
/// cached so that a locate does not look its agent's name up every time. A rename shows
/// within `lifetime`; at most `capacity` names are kept (the oldest go first).
final class ClientNames: Sendable {
    /// How long a looked-up name (or its absence) is reused.
    static let defaultLifetime: Duration = .seconds(300)
    /// The most client ids remembered.
    static let defaultCapacity = 1_000

    private struct Entry {
        let name: String?
        let fetchedAt: ContinuousClock.Instant
    }

    private let database: RelayDatabase
    private let logger: Logger
    private let lifetime: Duration
    private let capacity: Int
    private let entries = Mutex<[String: Entry]>([:])
    /// Where a name's age is read (the instance's clock).
    private let clock: RelayClock

    init(database: RelayDatabase, logger: Logger = Logger(level: .error), lifetime: Duration = ClientNames.defaultLifetime,
         capacity: Int = ClientNames.defaultCapacity, clock: RelayClock = .system) {
        self.clock = clock
        self.database = database
        self.logger = logger
        self.lifetime = lifetime
        self.capacity = capacity
    }

    /// The name of `clientID`, or nil when it has none or the database cannot say now.
    func name(of clientID: String) async -> String? {
        let now = clock.instant
        if let entry = entries.withLock({ $0[clientID] }), now - entry.fetchedAt < lifetime { return entry.name }
        let name: String?
        do {
            name = try await database.clientName(clientID)
        } catch {
            logger.failure("client_name_failed", error)
            return nil  // not cached: the next locate asks again
        }
        entries.withLock { entries in
            if entries.count >= capacity, let oldest = entries.min(by: { $0.value.fetchedAt < $1.value.fetchedAt })?.key {
                entries[oldest] = nil
            }
            entries[clientID] = Entry(name: name, fetchedAt: now)
        }
        return name
    }
}
