import Foundation
import PGBus

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
        try await withThrowingTaskGroup(of: PGListenerEvent?.self) { group in
            group.addTask {
                var iterator = iterator
                return await iterator.next()
            }
            group.addTask {
                try await Task.sleep(for: limit)
                throw Timeout()
            }
            let first = try await group.next()!
            group.cancelAll()
            return first
        }
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

    /// Waits until `condition` holds, polling, or throws `Timeout`.
    static func eventually(within limit: Duration = .seconds(5), _ condition: () async throws -> Bool) async throws {
        let deadline = ContinuousClock.now + limit
        while try await !condition() {
            if ContinuousClock.now > deadline { throw Timeout() }
            try await Task.sleep(for: .milliseconds(20))
        }
    }
}
