import Foundation

// Blocking work in tests (a child process, a blocking socket read) runs on a thread of its
// own, never on the concurrency pool: the pool has one thread per core (two here), and a
// test that blocks them stalls every other test's tasks in the process — a handler's
// resumption, an `eventually`'s next look — for as long as it blocks (once
// `hangUpCancelsTheHandler` waited 9 s while other tests' processes ran).

/// Runs blocking work on a thread of its own and returns its result.
public func offPool<T: Sendable>(_ work: @escaping @Sendable () throws -> T) async throws -> T {
    try await withCheckedThrowingContinuation { continuation in
        Thread { continuation.resume(with: Result { try work() }) }.start()
    }
}

/// Runs blocking work on a thread of its own and returns its result.
public func offPool<T: Sendable>(_ work: @escaping @Sendable () -> T) async -> T {
    await withCheckedContinuation { continuation in
        Thread { continuation.resume(returning: work()) }.start()
    }
}
