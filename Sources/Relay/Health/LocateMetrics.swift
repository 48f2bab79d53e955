import Synchronization

/// Counters for /metrics: locate outcomes by kind and a latency histogram. Labels are
/// fixed words, never user data.
final class LocateMetrics: Sendable {
    /// Histogram bucket upper bounds in seconds.
    static let buckets: [Double] = [0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120]

    private struct State {
        var outcomes: [String: Int] = [:]
        var bucketCounts = [Int](repeating: 0, count: LocateMetrics.buckets.count)
        var count = 0
        var sum = 0.0
    }

    private let state = Mutex(State())

    /// Records one finished locate.
    func record(outcome: String, seconds: Double) {
        state.withLock { state in
            state.outcomes[outcome, default: 0] += 1
            for (index, bound) in Self.buckets.enumerated() where seconds <= bound { state.bucketCounts[index] += 1 }
            state.count += 1
            state.sum += seconds
        }
    }

    /// The Prometheus text of these metrics.
    var text: String {
        state.withLock { state in
            var lines = ["# HELP whereabot_locate_outcomes_total Finished locates by outcome.",
                         "# TYPE whereabot_locate_outcomes_total counter"]
            for (outcome, count) in state.outcomes.sorted(by: { $0.key < $1.key }) {
                lines.append("whereabot_locate_outcomes_total{outcome=\"\(outcome)\"} \(count)")
            }
            lines += ["# HELP whereabot_locate_seconds Time from request to answer.", "# TYPE whereabot_locate_seconds histogram"]
            for (index, bound) in Self.buckets.enumerated() {
                lines.append("whereabot_locate_seconds_bucket{le=\"\(bound)\"} \(state.bucketCounts[index])")
            }
            lines += ["whereabot_locate_seconds_bucket{le=\"+Inf\"} \(state.count)",
                      "whereabot_locate_seconds_sum \(state.sum)", "whereabot_locate_seconds_count \(state.count)"]
            return lines.joined(separator: "\n") + "\n"
        }
    }
}
