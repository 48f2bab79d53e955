import Foundation
import Testing

/// The built `whereabot` executable, run as a user would run it.
@Suite struct CommandLineTests {
    /// The executable SwiftPM built beside this test bundle.
    static var executable: URL {
        var directory = Bundle.main.bundleURL
        while directory.path != "/" {
            let candidate = directory.appendingPathComponent("whereabot")
            var isDirectory: ObjCBool = false
            if FileManager.default.fileExists(atPath: candidate.path, isDirectory: &isDirectory), !isDirectory.boolValue {
                return candidate
            }
            directory.deleteLastPathComponent()
        }
        return Bundle.main.bundleURL.appendingPathComponent("whereabot")
    }

    static func run(_ arguments: [String]) throws -> (status: Int32, stdout: String, stderr: String) {
        let process = Process()
        process.executableURL = executable
        process.arguments = arguments
        let out = Pipe(), err = Pipe()
        process.standardOutput = out
        process.standardError = err
        try process.run()
        let stdout = out.fileHandleForReading.readDataToEndOfFile()
        let stderr = err.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        return (process.terminationStatus, String(decoding: stdout, as: UTF8.self), String(decoding: stderr, as: UTF8.self))
    }

    /// `whereabot version` prints the name and a semantic version and exits 0.
    @Test func versionPrintsTheVersion() throws {
        let result = try Self.run(["version"])
        #expect(result.status == 0)
        #expect(result.stdout.range(of: #"^whereabot \d+\.\d+\.\d+\n$"#, options: .regularExpression) != nil)
    }

    /// An unknown command exits 64 (EX_USAGE) with the usage on stderr, nothing on stdout.
    @Test func unknownCommandIsAUsageError() throws {
        let result = try Self.run(["frobnicate"])
        #expect(result.status == 64)
        #expect(result.stdout.isEmpty)
        #expect(result.stderr.contains("unknown command 'frobnicate'"))
        #expect(result.stderr.contains("usage: whereabot"))
    }
}
