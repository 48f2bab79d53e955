import Foundation
import PGBus

/// Where the tests find the real PostgreSQL that `make test` starts.
enum TestDatabase {
    /// The bootstrap superuser on the test database (can terminate backends, create roles).
    static var adminURL: String {
        ProcessInfo.processInfo.environment["WHEREABOT_TEST_ADMIN_URL"]
            ?? "postgresql://supabase_admin:postgres@127.0.0.1:54322/whereabot_test"
    }

    /// The test server's port (from `adminURL`: `make test` may run it on any port).
    static var port: Int { URLComponents(string: adminURL)?.port ?? 5432 }

    /// `adminURL` pointed at another port of this host (a proxy in front of the server).
    static func adminURL(port other: Int) -> String {
        adminURL.replacingOccurrences(of: ":\(port)/", with: ":\(other)/")
    }

    static var configuration: PGConfiguration {
        var configuration = PGConfiguration(adminURL, applicationName: "pgbus-tests")
        configuration.connectTimeoutSeconds = 5
        return configuration
    }

    static func connect() async throws -> PGConnection {
        try await PGConnection.connect(configuration)
    }

    /// A channel name no other test uses.
    static func uniqueChannel(_ prefix: String = "pgbus_test") -> String {
        "\(prefix)_\(UUID().uuidString.prefix(8).lowercased())"
    }
}
