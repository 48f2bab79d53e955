/// The two ways tests wait: for a condition another party owns, and for an answer that may
/// never come. Both read the real clock, since what they wait on (Postgres, a socket peer,
/// another task) runs in real time; they are the only sleeps shared by the test targets,
/// and neither sleeps longer than it must: a fixed sleep that hopes something happened in
/// the meantime is what they replace.

/// A condition did not hold in time.
public struct TimedOut: Error, CustomStringConvertible {
    /// What was waited for.
    public let what: String
    /// How long.
    public let limit: Duration

    public var description: String { "\(what) did not happen within \(limit)" }
}

/// Returns once `condition` holds, checking it every few milliseconds; throws `TimedOut`
/// after `limit`. For state that offers no event to wait on: a row in Postgres, a counter
/// of another component, a socket table.
public func eventually(_ what: String, within limit: Duration = .seconds(10), every interval: Duration = .milliseconds(5),
                       _ condition: () async throws -> Bool) async throws {
    let deadline = ContinuousClock.now + limit
    while try await !condition() {
        guard ContinuousClock.now < deadline else { throw TimedOut(what: what, limit: limit) }
        // Real time: the condition belongs to another process or thread, which needs it.
        try await Task.sleep(for: interval)
    }
}

/// `body`'s result, or nil when it has none within `limit` (its task is then cancelled).
public func withTimeout<T: Sendable>(_ limit: Duration, _ body: @escaping @Sendable () async -> T?) async -> T? {
    await withTaskGroup(of: T?.self) { group in
        group.addTask(operation: body)
        group.addTask {
            // Real time: the answer comes from a peer that may never send it.
            try? await Task.sleep(for: limit)
            return nil
        }
        let first = await group.next() ?? nil
        group.cancelAll()
        return first
    }
}
