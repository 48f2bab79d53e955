// swift-tools-version:6.0
// The Whereabot relay: see docs/architecture.md for the modules and what each may import,
// and README.md for the rest of the documentation.
import PackageDescription

let package = Package(
    name: "whereabot",
    platforms: [.macOS(.v14)],
    products: [
        .executable(name: "whereabot", targets: ["whereabot"]),
        .library(name: "Loop", targets: ["Loop"]),
        .library(name: "Lifecycle", targets: ["Lifecycle"]),
        .library(name: "PGBus", targets: ["PGBus"]),
        .library(name: "HTTPServer", targets: ["HTTPServer"]),
        .library(name: "Crypto", targets: ["Crypto"]),
        .library(name: "JSON", targets: ["JSON"]),
        .library(name: "Push", targets: ["Push"]),
        .library(name: "RelayCore", targets: ["RelayCore"]),
        .library(name: "Relay", targets: ["Relay"]),
    ],
    targets: [
        // System libraries from Debian (libpq-dev, libssl-dev, libcurl4-openssl-dev).
        .systemLibrary(name: "CLibPQ", pkgConfig: "libpq", providers: [.apt(["libpq-dev"])]),
        .systemLibrary(name: "COpenSSL", pkgConfig: "openssl", providers: [.apt(["libssl-dev"])]),
        .systemLibrary(name: "CCurl", pkgConfig: "libcurl", providers: [.apt(["libcurl4-openssl-dev"])]),
        // Tiny C shims for what Swift cannot call directly (epoll, eventfd, accept4,
        // and libcurl's variadic curl_easy_setopt).
        .target(name: "CSystem", dependencies: ["CCurl"]),

        // Services started in order and stopped in reverse, and owned unstructured tasks.
        .target(name: "Lifecycle"),
        // One epoll thread that HTTPServer and PGBus can share (neither knows the other).
        .target(name: "Loop", dependencies: ["CSystem"]),
        .target(name: "PGBus", dependencies: ["CLibPQ", "Loop"]),
        .target(name: "HTTPServer", dependencies: ["CSystem", "COpenSSL", "Loop"]),
        // base64url, SHA-256, HMAC, HKDF, AES-GCM, X25519 and P-256 over OpenSSL, for everyone.
        .target(name: "Crypto", dependencies: ["COpenSSL"]),
        // One bounded GET with libcurl (a JWKS, an OAuth client's metadata document).
        .target(name: "Fetch", dependencies: ["CCurl", "CSystem"]),
        // The strict JSON parser and writer every peer, database and log payload goes through.
        .target(name: "JSON"),
        // APNs and Web Push over one libcurl multi handle; knows nothing of locations.
        .target(name: "Push", dependencies: ["CSystem", "CCurl", "Crypto", "JSON"]),
        // The instance's values and the domain's messages, statuses and texts: decisions with
        // no I/O, no clock and no database (InstanceDriver in Relay performs them).
        .target(name: "RelayCore", dependencies: ["JSON"]),
        .target(name: "Relay", dependencies: ["RelayCore", "Lifecycle", "Loop", "PGBus", "HTTPServer", "Crypto", "Fetch", "JSON", "Push", "CSystem"],
                resources: [.copy("Resources/app")]),
        .executableTarget(name: "whereabot", dependencies: ["Relay", "Crypto", "JSON", "Push"]),
        // Benchmarks (`make bench-*`): print numbers, assert nothing.
        .executableTarget(name: "pgbus-bench", dependencies: ["PGBus"], path: "Benchmarks/PGBusBench"),
        .executableTarget(name: "push-bench", dependencies: ["Crypto", "Push"], path: "Benchmarks/PushBench"),
        .executableTarget(name: "locate-load", dependencies: ["HTTPServer"], path: "Benchmarks/LocateLoad"),
        // Also the server that acceptance tests drive with outside clients.
        .executableTarget(name: "http-echo-server", dependencies: ["HTTPServer"], path: "Benchmarks/HTTPEchoServer"),

        // What the test targets share: waiting for a condition or an answer, with a limit.
        .target(name: "TestSupport", dependencies: ["COpenSSL"], path: "Tests/TestSupport"),
        .testTarget(name: "LoopTests", dependencies: ["Loop"]),
        .testTarget(name: "LifecycleTests", dependencies: ["TestSupport", "Lifecycle"]),
        .testTarget(name: "PGBusTests", dependencies: ["TestSupport", "PGBus", "Loop"]),
        .testTarget(name: "HTTPServerTests", dependencies: ["TestSupport", "HTTPServer", "CSystem", "Loop"]),
        .testTarget(name: "CryptoTests", dependencies: ["Crypto"]),
        .testTarget(name: "JSONTests", dependencies: ["JSON"]),
        .testTarget(name: "PushTests", dependencies: ["TestSupport", "Crypto", "Push", "HTTPServer"]),
        .testTarget(name: "RelayCoreTests", dependencies: ["RelayCore", "JSON"]),
        // Relay's pure parts: no database, no sockets of their own.
        .testTarget(name: "RelayTests", dependencies: ["TestSupport", "RelayCore", "Relay", "HTTPServer", "PGBus", "Loop", "Crypto", "Fetch", "JSON", "Push", "COpenSSL"], exclude: ["Golden"]),
        // Relay against the test database (WHEREABOT_TEST_*_URL): drivers, harnesses, end to end.
        .testTarget(name: "RelayIntegrationTests", dependencies: ["TestSupport", "RelayCore", "Relay", "HTTPServer", "PGBus", "Loop", "Crypto", "JSON", "Push", "COpenSSL"]),
        .testTarget(name: "WhereabotTests", dependencies: ["TestSupport", "whereabot"]),
    ],
    swiftLanguageModes: [.v6]
)
