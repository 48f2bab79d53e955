import Foundation

/// A program a test runs to its end — the built `whereabot`, `curl`, `openssl` — started,
/// read and waited for off the concurrency pool (`offPool`).
public struct ChildProcess: Sendable {
    /// The exit status.
    public let status: Int32
    /// Everything it wrote to standard output.
    public let stdout: String
    /// Everything it wrote to standard error (empty when it went to /dev/null).
    public let stderr: String

    /// Runs `executable` with `arguments` (and `environment`, else the test's) until it exits.
    /// Standard error is captured unless `discardingStandardError`.
    public static func run(_ executable: URL, _ arguments: [String], environment: [String: String]? = nil,
                           discardingStandardError: Bool = false) async throws -> ChildProcess {
        try await offPool {
            let process = Process()
            process.executableURL = executable
            process.arguments = arguments
            if let environment { process.environment = environment }
            let out = Pipe(), err = Pipe()
            process.standardOutput = out
            process.standardError = discardingStandardError ? FileHandle.nullDevice : err
            try process.run()
            // Both pipes drain at once: a child that fills one while we wait on the other
            // would never exit.
            let errorReader = discardingStandardError ? nil : ErrorReader(err.fileHandleForReading)
            let stdout = out.fileHandleForReading.readDataToEndOfFile()
            let stderr = errorReader?.wait() ?? Data()
            process.waitUntilExit()
            return ChildProcess(status: process.terminationStatus, stdout: String(decoding: stdout, as: UTF8.self),
                                stderr: String(decoding: stderr, as: UTF8.self))
        }
    }

    /// Reads a pipe to its end on a thread of its own.
    private final class ErrorReader: @unchecked Sendable {
        private let done = NSCondition()
        private var data: Data?  // guarded by `done`

        init(_ handle: FileHandle) {
            Thread { [self] in
                let read = handle.readDataToEndOfFile()
                done.lock()
                data = read
                done.broadcast()
                done.unlock()
            }.start()
        }

        func wait() -> Data {
            done.lock()
            defer { done.unlock() }
            while data == nil { done.wait() }
            return data!
        }
    }
}
