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
        let process = Process()
        process.executableURL = executable
        process.arguments = arguments
        if let environment { process.environment = environment }
        let out = Pipe(), err = Pipe()
        process.standardOutput = out
        process.standardError = discardingStandardError ? FileHandle.nullDevice : err
        try await offPool { try process.run() }
        // Both pipes drain at once: a child that fills one while we wait on the other would
        // never exit.
        async let stderr = discardingStandardError ? Data() : offPool { err.fileHandleForReading.readDataToEndOfFile() }
        let stdout = await offPool { out.fileHandleForReading.readDataToEndOfFile() }
        let status = await offPool { process.waitUntilExit(); return process.terminationStatus }
        return ChildProcess(status: status, stdout: String(decoding: stdout, as: UTF8.self),
                            stderr: String(decoding: await stderr, as: UTF8.self))
    }
}
