import Push
import Synchronization

/// Push counters for /metrics: pushes by service, kind and result; claims by stage and
/// status; send latency. Labels are fixed words, never user data.
final class PushMetrics: Sendable {
    /// Histogram bucket upper bounds in seconds.
    static let buckets: [Double] = [0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10]

    private struct State {
        var pushes: [String: Int] = [:]
        var claims: [String: Int] = [:]
        var bucketCounts = [Int](repeating: 0, count: PushMetrics.buckets.count)
        var count = 0
        var sum = 0.0
    }

    private let state = Mutex(State())

    /// Counts one push outcome (and its retry, when there was one).
    func push(service: String, kind: String, delivery: PushDelivery, seconds: Double?) {
        state.withLock { state in
            state.pushes["service=\"\(service)\",kind=\"\(kind)\",result=\"\(delivery.result.rawValue)\"", default: 0] += 1
            if delivery.retried { state.pushes["service=\"\(service)\",kind=\"\(kind)\",result=\"retried\"", default: 0] += 1 }
            guard let seconds else { return }
            for (index, bound) in Self.buckets.enumerated() where seconds <= bound { state.bucketCounts[index] += 1 }
            state.count += 1
            state.sum += seconds
        }
    }

    /// Counts one claim answer.
    func claim(stage: String, status: String) {
        state.withLock { $0.claims["stage=\"\(stage)\",status=\"\(status)\"", default: 0] += 1 }
    }

    /// Pushes counted with this result so far (all services and kinds).
    func count(result: PushResult) -> Int {
        state.withLock { state in state.pushes.filter { $0.key.hasSuffix("result=\"\(result.rawValue)\"") }.values.reduce(0, +) }
    }

    /// The Prometheus text of these metrics.
    var text: String {
        state.withLock { state in
            var lines = ["# HELP whereabot_pushes_total Pushes by service, kind and result.",
                         "# TYPE whereabot_pushes_total counter"]
            lines += state.pushes.sorted { $0.key < $1.key }.map { "whereabot_pushes_total{\($0.key)} \($0.value)" }
            lines += ["# HELP whereabot_push_claims_total Push stage claims by stage and status.",
                      "# TYPE whereabot_push_claims_total counter"]
            lines += state.claims.sorted { $0.key < $1.key }.map { "whereabot_push_claims_total{\($0.key)} \($0.value)" }
            lines += ["# HELP whereabot_push_seconds Time to send one push (its answer included).",
                      "# TYPE whereabot_push_seconds histogram"]
            for (index, bound) in Self.buckets.enumerated() {
                lines.append("whereabot_push_seconds_bucket{le=\"\(bound)\"} \(state.bucketCounts[index])")
            }
            lines += ["whereabot_push_seconds_bucket{le=\"+Inf\"} \(state.count)",
                      "whereabot_push_seconds_sum \(state.sum)", "whereabot_push_seconds_count \(state.count)"]
            return lines.joined(separator: "\n") + "\n"
        }
    }
}
