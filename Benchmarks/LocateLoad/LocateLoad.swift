// `locate-load`: the compiled load generator of `make bench-relay` (docs/testing.md,
// "Benchmarks"), so that the client is not the limit. It reads a plan (JSON, path in LOAD_PLAN)
// made by Benchmarks/relay_bench.py: pairs of an agent token and a phone token with the ports
// of the instances the agent asks and the phone is connected to. Every phone (the project's
// WebSocketClient) answers every ping at once with a fix; every agent (a blocking HTTP/1.1
// keep-alive client on a thread of its own) asks in a loop for `seconds`, or `samples` times in
// a row. Prints one JSON line: locates, failures, seconds, latency percentiles, and the
// client's own CPU seconds.
import Foundation
import Glibc
import HTTPServer
import Synchronization

struct Plan: Decodable {
    struct Pair: Decodable {
        let agentPort: Int
        let phonePort: Int
        let agentToken: String
        let phoneToken: String
    }
    let pairs: [Pair]
    let seconds: Double?
    let samples: Int?
    /// Instead of locates: WebSocket round trips to this echo server (the latency floor).
    let echoPort: Int?
}

/// Connects a phone that answers every locate with a fix; returns once it said hello.
func connectPhone(port: Int, token: String) async throws -> (WebSocketClient, Task<Void, Never>) {
    let client = try await WebSocketClient.connect("ws://127.0.0.1:\(port)/v1/device",
                                                   headers: [("Authorization", "Bearer \(token)")])
    client.send(#"{"type":"hello","app_version":"1","device_id":"\#(UUID().uuidString.lowercased())","device_name":"Load","platform":"android"}"#)
    let task = Task {
        for await message in client.messages {
            guard case .text(let text) = message, text.contains(#""type":"locate""#),
                  let start = text.range(of: #""id":""#) else { continue }
            let id = text[start.upperBound...].prefix(36)
            let now = Int64(Date().timeIntervalSince1970 * 1000)
            client.send(#"{"type":"location","id":"\#(id)","latitude":52.52,"longitude":13.405,"accuracy_m":12,"timestamp_ms":\#(now)}"#)
        }
    }
    return (client, task)
}

/// One agent on its own thread: POST /v1/locate over one keep-alive connection.
final class Agent: @unchecked Sendable {
    let port: Int
    let request: [UInt8]
    var latencies: [Double] = []
    var failures = 0
    /// Every answered locate, warm-up included (what the relays did).
    var answered = 0
    private var buffer = [UInt8](repeating: 0, count: 65_536)
    private var pending: [UInt8] = []

    init(port: Int, token: String) {
        self.port = port
        self.request = Array("POST /v1/locate?timeout_secs=10 HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer \(token)\r\nContent-Length: 0\r\n\r\n".utf8)
    }

    func run(until deadline: Double?, count: Int?) {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        var yes: Int32 = 1
        setsockopt(fd, Int32(IPPROTO_TCP), TCP_NODELAY, &yes, socklen_t(MemoryLayout<Int32>.size))
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = UInt16(port).bigEndian
        inet_pton(AF_INET, "127.0.0.1", &address.sin_addr)
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard connected == 0 else {
            failures += 1
            return
        }
        defer { close(fd) }
        var done = 0
        while true {
            if let count, done >= count { break }
            let started = now()
            if let deadline, started >= deadline { break }
            guard request.withUnsafeBytes({ send(fd, $0.baseAddress, $0.count, 0) }) == request.count,
                  let status = readResponse(fd) else {
                failures += 1
                return
            }
            if status == 200 {
                latencies.append((now() - started) * 1000)
                answered += 1
            } else {
                failures += 1
            }
            done += 1
        }
    }

    /// Reads one response; returns its status (nil when the connection broke).
    private func readResponse(_ fd: Int32) -> Int? {
        while true {
            if let end = headEnd() {
                let head = String(decoding: pending[..<end], as: UTF8.self)
                let status = Int(head.split(separator: " ", maxSplits: 2).dropFirst().first ?? "") ?? 0
                var length = 0
                for line in head.split(separator: "\r\n") where line.lowercased().hasPrefix("content-length:") {
                    length = Int(line.split(separator: ":")[1].trimmingCharacters(in: .whitespaces)) ?? 0
                }
                while pending.count < end + 4 + length { guard fill(fd) else { return nil } }
                pending.removeFirst(end + 4 + length)
                return status
            }
            guard fill(fd) else { return nil }
        }
    }

    private func headEnd() -> Int? {
        guard pending.count >= 4 else { return nil }
        for index in 0...(pending.count - 4)
        where pending[index] == 13 && pending[index + 1] == 10 && pending[index + 2] == 13 && pending[index + 3] == 10 {
            return index
        }
        return nil
    }

    private func fill(_ fd: Int32) -> Bool {
        let count = recv(fd, &buffer, buffer.count, 0)
        guard count > 0 else { return false }
        pending.append(contentsOf: buffer[..<count])
        return true
    }
}

/// Calls `done` when `tick()` has been called `count` times (from any threads).
final class Countdown: Sendable {
    private let left: Mutex<Int>
    private let done: @Sendable () -> Void

    init(_ count: Int, done: @escaping @Sendable () -> Void) {
        left = Mutex(count)
        self.done = done
    }

    func tick() {
        if left.withLock({ count -> Int in
            count -= 1
            return count
        }) == 0 { done() }
    }
}

func now() -> Double {
    var time = timespec()
    clock_gettime(CLOCK_MONOTONIC, &time)
    return Double(time.tv_sec) + Double(time.tv_nsec) / 1e9
}

func percentile(_ sorted: [Double], _ fraction: Double) -> Double {
    sorted.isEmpty ? 0 : sorted[min(sorted.count - 1, Int(Double(sorted.count) * fraction))]
}

func cpuSeconds() -> Double {
    var usage = rusage()
    getrusage(RUSAGE_SELF.rawValue, &usage)
    return Double(usage.ru_utime.tv_sec + usage.ru_stime.tv_sec) + Double(usage.ru_utime.tv_usec + usage.ru_stime.tv_usec) / 1e6
}

/// WebSocket round trips through an echo server with the same client the phones use.
func echo(port: Int, samples: Int) async throws {
    let client = try await WebSocketClient.connect("ws://127.0.0.1:\(port)/ws")
    var iterator = client.messages.makeAsyncIterator()
    var latencies: [Double] = []
    for index in 0..<(samples + 20) {
        let started = now()
        client.send(#"{"type":"locate","id":"00000000-0000-4000-8000-000000000000"}"#)
        guard await iterator.next() != nil else { throw WebSocketClient.ConnectError.badHandshake }
        if index >= 20 { latencies.append((now() - started) * 1000) }
    }
    client.close()
    let sorted = latencies.sorted()
    print(#"{"p50_ms":\#(percentile(sorted, 0.5)),"p99_ms":\#(percentile(sorted, 0.99))}"#)
}

@main
struct LocateLoad {
    static func main() async throws {
        guard let path = ProcessInfo.processInfo.environment["LOAD_PLAN"] else {
            FileHandle.standardError.write(Data("usage: LOAD_PLAN=plan.json locate-load\n".utf8))
            exit(64)
        }
        let decoder = JSONDecoder()
        decoder.keyDecodingStrategy = .convertFromSnakeCase
        let plan = try decoder.decode(Plan.self, from: Data(contentsOf: URL(fileURLWithPath: path)))
        if let echoPort = plan.echoPort {
            try await echo(port: echoPort, samples: plan.samples ?? 300)
            return
        }
        var phones: [(WebSocketClient, Task<Void, Never>)] = []
        for pair in plan.pairs { phones.append(try await connectPhone(port: pair.phonePort, token: pair.phoneToken)) }
        try await Task.sleep(for: .seconds(1))  // every hello registered

        let agents = plan.pairs.map { Agent(port: $0.agentPort, token: $0.agentToken) }
        if plan.samples != nil {  // warm-up, not counted
            for agent in agents { agent.run(until: nil, count: 20) }
            for agent in agents { agent.latencies.removeAll() }
        }
        let cpuBefore = cpuSeconds()
        let started = now()
        let deadline = plan.seconds.map { started + $0 }
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let left = Countdown(agents.count) { continuation.resume() }
            for agent in agents {
                let thread = Thread {
                    agent.run(until: deadline, count: plan.samples)
                    left.tick()
                }
                thread.stackSize = 1 << 20
                thread.start()
            }
        }
        let elapsed = now() - started
        let cpu = cpuSeconds() - cpuBefore
        let latencies = agents.flatMap(\.latencies).sorted()
        let failures = agents.reduce(0) { $0 + $1.failures }
        for (client, task) in phones {
            client.close()
            task.cancel()
        }
        let result: [String: Any] = [
            "locates": latencies.count, "failed": failures, "seconds": elapsed,
            "p50_ms": percentile(latencies, 0.5), "p99_ms": percentile(latencies, 0.99), "client_cpu_seconds": cpu,
            "answered": agents.reduce(0) { $0 + $1.answered },
        ]
        print(String(decoding: try JSONSerialization.data(withJSONObject: result, options: [.sortedKeys]), as: UTF8.self))
    }
}
