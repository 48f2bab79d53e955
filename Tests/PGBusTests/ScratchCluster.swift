import Foundation
import Glibc
import PGBus

/// A PostgreSQL cluster of the test's own (scripts/scratch-cluster.sh), for tests that
/// restart or crash the server without disturbing the shared test database.
final class ScratchCluster: Sendable {
    let directory: String
    let port: Int

    static var script: String {
        URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().appendingPathComponent("scripts/scratch-cluster.sh").path
    }

    private init(directory: String, port: Int) {
        self.directory = directory
        self.port = port
    }

    /// Creates and starts a cluster on a random port; a port that turns out to be taken
    /// (56000-60000 lies in Linux's ephemeral range, where outgoing connections live) is
    /// tried again on another, up to three times.
    static func start() async throws -> ScratchCluster {
        var attempt = 0
        while true {
            attempt += 1
            let cluster = ScratchCluster(directory: "/tmp/pgbus-scratch-\(UUID().uuidString.prefix(8))",
                                         port: Int.random(in: 56000..<60000))
            do {
                try await run("start", cluster.directory, String(cluster.port))
                return cluster
            } catch where attempt < 3 {
                await cluster.stop()
            }
        }
    }

    var configuration: PGConfiguration {
        var configuration = PGConfiguration("postgresql://postgres@127.0.0.1:\(port)/postgres",
                                            applicationName: "pgbus-scratch")
        configuration.connectTimeoutSeconds = 3
        return configuration
    }

    func restart() async throws { try await Self.run("restart", directory) }
    func stop() async { try? await Self.run("stop", directory) }

    /// Runs the script (posix_spawn, waitpid on a thread of its own) without blocking a
    /// concurrency thread. Foundation's Process waits forever here, because the server
    /// that pg_ctl starts outlives the script.
    static func run(_ arguments: String...) async throws {
        let argv = [script] + arguments
        let status: Int32 = await withCheckedContinuation { continuation in
            Thread {
                var pid = pid_t()
                let cArguments = argv.map { strdup($0) } + [nil]
                defer { cArguments.forEach { free($0) } }
                guard posix_spawn(&pid, script, nil, nil, cArguments, environ) == 0 else {
                    continuation.resume(returning: -1)
                    return
                }
                var status: Int32 = 0
                while waitpid(pid, &status, 0) < 0 && errno == EINTR {}
                continuation.resume(returning: status)
            }.start()
        }
        guard status == 0 else {
            throw PGError(.connectionFailed, detail: "scratch-cluster.sh \(arguments.joined(separator: " ")) failed")
        }
    }
}
