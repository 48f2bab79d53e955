import Foundation
import Glibc
import TestSupport
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

    static func run(_ arguments: [String], environment: [String: String]? = nil) async throws -> ChildProcess {
        try await ChildProcess.run(executable, arguments, environment: environment)
    }

    /// `whereabot version` prints the name and a semantic version and exits 0.
    @Test func versionPrintsTheVersion() async throws {
        let result = try await Self.run(["version"])
        #expect(result.status == 0)
        #expect(result.stdout.range(of: #"^whereabot \d+\.\d+\.\d+\n$"#, options: .regularExpression) != nil)
    }

    /// An unknown command exits 64 (EX_USAGE) with the usage on stderr, nothing on stdout.
    @Test func unknownCommandIsAUsageError() async throws {
        let result = try await Self.run(["frobnicate"])
        #expect(result.status == 64)
        #expect(result.stdout.isEmpty)
        #expect(result.stderr.contains("unknown command 'frobnicate'"))
        #expect(result.stderr.contains("usage: whereabot"))
    }

    /// What a restart cannot fix ends `serve` at once with exit 64 and one sentence naming
    /// the setting and the reason (docs/operations.md, "Routes": start in any order); what may
    /// come later — the database, the JWKS URL — does not (the fault tests start relays with
    /// both down).
    @Test func serveNamesTheSettingThatStopsIt() async throws {
        let base = ["DATABASE_URL": "postgresql://whereabot_relay:hunter2@127.0.0.1:1/x",
                    "SUPABASE_JWT_SECRET": String(repeating: "s", count: 40), "PATH": "/usr/bin:/bin"]
        let taken = Socket.listening()
        defer { close(taken.fd) }
        let cases: [(String, String, String)] = [
            ("PORT", "eighty", "PORT must be a whole number from 0 to 65535"),
            ("HOST", "localhost", "HOST must be an IPv4 address such as 0.0.0.0 or 127.0.0.1"),
            ("DATABASE_URL", "postgresql://%zz", "DATABASE_URL cannot be parsed"),
            ("SUPABASE_JWKS_FILE", "/nonexistent/jwks.json",
             "SUPABASE_JWKS_FILE: signing keys /nonexistent/jwks.json: cannot read the file"),
            ("PORT", String(taken.port), "PORT \(taken.port) on HOST 127.0.0.1: cannot listen"),
        ]
        for (name, value, sentence) in cases {
            let result = try await Self.run(["serve"], environment: base.merging([name: value]) { $1 })
            #expect(result.status == 64, "\(name)=\(value)")
            #expect(result.stderr.contains("whereabot serve: " + sentence), "\(name)=\(value): \(result.stderr)")
            #expect(!result.stderr.contains("hunter2"))
        }
    }
}

/// A listening socket on a free port of 127.0.0.1 (so that another bind of it fails).
enum Socket {
    static func listening() -> (fd: Int32, port: Int) {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        _ = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        listen(fd, 1)
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) }
        }
        return (fd, Int(UInt16(bigEndian: address.sin_port)))
    }
}
