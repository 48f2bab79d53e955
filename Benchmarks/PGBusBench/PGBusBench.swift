import Foundation
import PGBus

/// `make bench-pgbus`: PGBus's query latency, NOTIFY round trip and notification
/// throughput against the local database, each beside the pgbench baseline that
/// scripts/bench-pgbus.sh measured just before (BASELINE_* variables). Prints a table;
/// asserts nothing.
@main
struct PGBusBench {
    static func main() async throws {
        let environment = ProcessInfo.processInfo.environment
        guard let url = environment["BENCH_DATABASE_URL"] else {
            FileHandle.standardError.write(Data("pgbus-bench: set BENCH_DATABASE_URL\n".utf8))
            exit(64)
        }
        let seconds = Double(environment["BENCH_SECONDS"] ?? "5") ?? 5
        let configuration = PGConfiguration(url, applicationName: "pgbus-bench")

        let query = try await queryLatency(configuration, seconds: seconds)
        func baseline(_ name: String) -> Double { Double(environment[name] ?? "") ?? .nan }
        let baselineQuery = PgbenchResult(latency: baseline("BASELINE_QUERY_MS") / 1000, tps: .nan)
        let roundTrip = try await notifyRoundTrip(configuration, seconds: seconds)
        let throughput = try await notificationThroughput(configuration, seconds: seconds)
        let baselineNotify = PgbenchResult(latency: baseline("BASELINE_NOTIFY_MS") / 1000,
                                           tps: baseline("BASELINE_NOTIFY_TPS"))

        func ms(_ value: Double) -> String { String(format: "%.3f ms", value * 1000) }
        func ratio(_ value: Double, _ baseline: Double) -> String { String(format: "%.2f", value / baseline) }
        let rows: [(String, String, String, String)] = [
            ("query select 1, mean", ms(query.mean), "pgbench -M extended -c1, mean " + ms(baselineQuery.latency),
             ratio(query.mean, baselineQuery.latency)),
            ("query select 1, p50 / p99", ms(query.p50) + " / " + ms(query.p99), "", ""),
            ("NOTIFY to listener, p50", ms(roundTrip.p50), "pgbench pg_notify commit, mean " + ms(baselineNotify.latency),
             ratio(roundTrip.p50, baselineNotify.latency)),
            ("NOTIFY to listener, p99", ms(roundTrip.p99), "", ratio(roundTrip.p99, baselineNotify.latency)),
            ("notifications/s, end to end", String(format: "%.0f/s", throughput),
             String(format: "pgbench pg_notify -c1, %.0f/s", baselineNotify.tps),
             ratio(throughput, baselineNotify.tps)),
        ]
        print("PGBus benchmark (\(Int(seconds)) s per measurement, one connection each, loopback)")
        print("metric".padding(toLength: 30, withPad: " ", startingAt: 0) + "pgbus".padding(toLength: 22, withPad: " ", startingAt: 0)
              + "baseline".padding(toLength: 44, withPad: " ", startingAt: 0) + "ratio")
        for (metric, value, baseline, ratio) in rows {
            print(metric.padding(toLength: 30, withPad: " ", startingAt: 0) + value.padding(toLength: 22, withPad: " ", startingAt: 0)
                  + baseline.padding(toLength: 44, withPad: " ", startingAt: 0) + ratio)
        }
    }

    struct Latencies { let mean: Double; let p50: Double; let p99: Double }

    /// A pgbench run: mean latency (seconds) and transactions per second.
    struct PgbenchResult { let latency: Double; let tps: Double }

    static func summarize(_ samples: [Double]) -> Latencies {
        let sorted = samples.sorted()
        return Latencies(mean: sorted.reduce(0, +) / Double(sorted.count),
                         p50: sorted[sorted.count / 2], p99: sorted[min(sorted.count - 1, sorted.count * 99 / 100)])
    }

    static func now() -> Double { Double(DispatchTime.now().uptimeNanoseconds) / 1e9 }

    /// Sequential `select 1` on one connection.
    static func queryLatency(_ configuration: PGConfiguration, seconds: Double) async throws -> Latencies {
        let connection = try await PGConnection.connect(configuration)
        var samples: [Double] = []
        let end = now() + seconds
        while now() < end {
            let start = now()
            try await connection.query("select 1")
            samples.append(now() - start)
        }
        await connection.close()
        return summarize(samples)
    }

    /// One NOTIFY at a time, timed from before sending until the listener's consumer has it.
    static func notifyRoundTrip(_ configuration: PGConfiguration, seconds: Double) async throws -> Latencies {
        let listener = PGListener(configuration: configuration)
        let notifier = try await PGConnection.connect(configuration)
        async let running: Void = listener.run()
        let samples = try await listener.listen(on: ["pgbus_bench_rtt"]) { events in
            var iterator = events.makeAsyncIterator()
            _ = await iterator.next()  // the initial resync
            var samples: [Double] = []
            let end = now() + seconds
            while now() < end {
                let start = now()
                try await notifier.notify(channel: "pgbus_bench_rtt", payload: "x")
                while case .resync? = await iterator.next() {}
                samples.append(now() - start)
            }
            return samples
        }
        listener.shutdown()
        await running
        await notifier.close()
        return summarize(samples)
    }

    /// Notifications received per second while one connection sends them back to back.
    static func notificationThroughput(_ configuration: PGConfiguration, seconds: Double) async throws -> Double {
        let listener = PGListener(configuration: configuration)
        let notifier = try await PGConnection.connect(configuration)
        async let running: Void = listener.run()
        let rate = try await listener.listen(on: ["pgbus_bench_rate"]) { events in
            var iterator = events.makeAsyncIterator()
            _ = await iterator.next()
            let sender = Task {
                var sent = 0
                let end = now() + seconds
                while now() < end {
                    try await notifier.notify(channel: "pgbus_bench_rate", payload: String(sent))
                    sent += 1
                }
                try await notifier.notify(channel: "pgbus_bench_rate", payload: "end")
                return sent
            }
            let start = now()
            var received = 0
            while let event = await iterator.next() {
                if case .notification(let n) = event {
                    if n.payload == "end" { break }
                    received += 1
                }
            }
            let elapsed = now() - start
            _ = try await sender.value
            return Double(received) / elapsed
        }
        listener.shutdown()
        await running
        await notifier.close()
        return rate
    }
}
