import Foundation
import PGBus
import TestSupport

/// Runs a listener for the duration of a test and reads events with a deadline.
enum ListenerHarness {
    struct Timeout: Error {}

    static func withListener<R: Sendable>(
        _ configuration: PGConfiguration = TestDatabase.configuration,
        heartbeatInterval: Duration = PGListener.defaultHeartbeatInterval,
        _ body: (PGListener) async throws -> R
    ) async throws -> R {
        let listener = PGListener(configuration: configuration, heartbeatInterval: heartbeatInterval,
                                  backoff: PGBackoff(initial: .milliseconds(200), maximum: .seconds(2)))
        return try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask { await listener.run() }
            do {
                let result = try await body(listener)
                listener.shutdown()
                try await group.waitForAll()
                return result
            } catch {
                listener.shutdown()
                try? await group.waitForAll()
                throw error
            }
        }
    }

    /// The next event, or `Timeout` after `limit`.
    static func next(_ iterator: PGNotificationSequence.Iterator,
                     within limit: Duration = .seconds(5)) async throws -> PGListenerEvent? {
        let event = await withTimeout(limit) { () -> PGListenerEvent?? in
            var iterator = iterator
            return .some(await iterator.next())
        }
        guard let event else { throw Timeout() }
        return event
    }

    /// Skips events until a notification arrives; returns it and whether a resync came first.
    static func nextNotification(_ iterator: PGNotificationSequence.Iterator,
                                 within limit: Duration = .seconds(5)) async throws -> (PGNotification, sawResync: Bool) {
        var sawResync = false
        let deadline = ContinuousClock.now + limit
        while true {
            switch try await next(iterator, within: deadline - ContinuousClock.now) {
            case .notification(let notification): return (notification, sawResync)
            case .resync: sawResync = true
            case nil: throw Timeout()
            }
        }
    }
}
