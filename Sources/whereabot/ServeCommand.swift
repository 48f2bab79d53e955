import Dispatch
import Foundation
import Glibc
import PGBus
import HTTPServer
import Relay

/// `whereabot serve`: one relay instance, configured from the environment
/// (docs/operations.md, "Configuration", lists every variable). SIGTERM or SIGINT drains it:
/// device sockets close 1012 "restart".
enum ServeCommand {
    static func run(environment: [String: String]) async throws {
        func value(_ name: String) -> String? { environment[name].flatMap { $0.isEmpty ? nil : $0 } }
        guard let databaseURL = value("DATABASE_URL") else {
            throw CommandError.usage("DATABASE_URL is required (the whereabot_relay role's connection)")
        }
        for name in ["DATABASE_URL", "LISTEN_DATABASE_URL"] {
            if let url = value(name), !PGConfiguration(url).isParsable {
                throw CommandError.usage("\(name) cannot be parsed: give a postgresql:// URL or a key=value conninfo string")
            }
        }
        guard let port = Int(value("PORT") ?? "8080"), (0...65535).contains(port) else {
            throw CommandError.usage("PORT must be a whole number from 0 to 65535")
        }
        let host = value("HOST") ?? "127.0.0.1"
        var probe = in_addr()
        guard inet_pton(AF_INET, host, &probe) == 1 else {
            throw CommandError.usage("HOST must be an IPv4 address such as 0.0.0.0 or 127.0.0.1")
        }
        let supabaseURL = value("SUPABASE_URL").map { $0.hasSuffix("/") ? String($0.dropLast()) : $0 }
        let jwks: JWKSSource = value("SUPABASE_JWKS_FILE").map { .file($0) } ?? value("SUPABASE_JWKS_URL").map { .url($0) } ?? .none
        guard value("SUPABASE_JWT_SECRET") != nil || jwks != .none else {
            throw CommandError.usage("set SUPABASE_JWT_SECRET or SUPABASE_JWKS_URL / SUPABASE_JWKS_FILE")
        }
        let instance = value("INSTANCE_ID") ?? "\(ProcessInfo.processInfo.hostName.prefix(40))-\(getpid())"
        var configuration = RelayService.Configuration(
            database: PGConfiguration(databaseURL, applicationName: "whereabot-\(instance)".prefix(60).description),
            listenDatabase: value("LISTEN_DATABASE_URL").map { PGConfiguration($0, applicationName: "whereabot-listen") },
            host: host, port: port, publicURL: value("PUBLIC_URL") ?? "http://\(host):\(port)",
            instanceID: String(instance.map { $0.isLetter || $0.isNumber || "._:-".contains($0) ? $0 : "-" }),
            jwtSecret: value("SUPABASE_JWT_SECRET"), jwks: jwks, issuer: supabaseURL.map { $0 + "/auth/v1" })
        if let seconds = value("DATABASE_TIMEOUT_SECONDS") {
            guard let number = Int(seconds), (1...60).contains(number) else {
                throw CommandError.usage("DATABASE_TIMEOUT_SECONDS must be a whole number from 1 to 60")
            }
            configuration.database.callTimeout = .seconds(number)
            configuration.listenDatabase?.callTimeout = .seconds(number)
        }
        configuration.supabaseURL = supabaseURL
        configuration.oauthAudience = value("OAUTH_AUDIENCE")
        configuration.supabaseAnonKey = value("SUPABASE_ANON_KEY")
        configuration.oauth = try Self.oauthSettings(value)
        if let seconds = value("ALLOW_FOR_SECONDS") {
            guard let number = Int(seconds), (1...86_400).contains(number) else {
                throw CommandError.usage("ALLOW_FOR_SECONDS must be a whole number from 1 to 86400")
            }
            configuration.allowForSeconds = number
        }
        if let days = value("GRANT_REMINDER_DAYS") {
            guard let number = Int(days), (0...365).contains(number) else {
                throw CommandError.usage("GRANT_REMINDER_DAYS must be a whole number from 0 (no reminders) to 365")
            }
            configuration.grantReminderSeconds = number == 0 ? nil : number * 86_400
        }
        if let seconds = value("GRANT_REMINDER_SECONDS") {  // tests: the same in seconds
            guard let number = Int(seconds), (1...31_536_000).contains(number) else {
                throw CommandError.usage("GRANT_REMINDER_SECONDS must be a whole number from 1 to 31536000")
            }
            configuration.grantReminderSeconds = number
        }
        if let seconds = value("MCP_PROGRESS_SECONDS") {
            guard let number = Int(seconds), (1...60).contains(number) else {
                throw CommandError.usage("MCP_PROGRESS_SECONDS must be a whole number from 1 to 60")
            }
            configuration.mcpProgressInterval = .seconds(number)
        }
        if let seconds = value("MCP_WAIT_SECONDS") {
            guard let number = Int(seconds), (5...110).contains(number) else {
                throw CommandError.usage("MCP_WAIT_SECONDS must be a whole number from 5 to 110")
            }
            configuration.mcpWaitBound = .seconds(number)
        }
        if let directory = value("APP_DIR") {
            var isDirectory: ObjCBool = false
            guard FileManager.default.fileExists(atPath: directory, isDirectory: &isDirectory), isDirectory.boolValue else {
                throw CommandError.usage("APP_DIR must be a directory (Sources/Relay/Resources/app of a checkout)")
            }
            configuration.appDirectory = URL(fileURLWithPath: directory)
        }
        if let seconds = value("JWKS_MIN_REFRESH_SECONDS") {
            guard let number = Int(seconds), (1...600).contains(number) else {
                throw CommandError.usage("JWKS_MIN_REFRESH_SECONDS must be a whole number from 1 to 600")
            }
            configuration.jwksRefresh = TimeInterval(number)...Authenticator.defaultJWKSRefresh.upperBound
        }
        if let key = value("REQUEST_ID_KEY") {
            guard let bytes = Data(base64Encoded: key), bytes.count == 32 else {
                throw CommandError.usage("REQUEST_ID_KEY must be 32 bytes in base64 (openssl rand -base64 32), the same on every instance")
            }
            configuration.requestIDKey = Array(bytes)
        }
        configuration.allowedOrigins = (value("ALLOWED_ORIGINS") ?? "").split(separator: ",").map { String($0.trimmingCharacters(in: .whitespaces)) }
        do { configuration.trustedProxies = try TrustedProxies(value("TRUSTED_PROXIES") ?? "") } catch {
            throw CommandError.usage("TRUSTED_PROXIES: \(error) (a comma-separated list such as 10.0.0.0/8, 127.0.0.1)")
        }
        let levelName = value("LOG_LEVEL") ?? "info"
        guard let level = Logger.Level(name: levelName) else {
            throw CommandError.usage("LOG_LEVEL must be debug, info, warning or error")
        }
        let logger = Logger(level: level)
        configuration.logger = logger
        do { configuration.push = try PushSettings.services(from: environment) } catch let invalid as PushSettings.Invalid {
            throw CommandError.usage(invalid.description)
        }

        let relay: RelayService
        do { relay = try RelayService(configuration) } catch let error as JWKSSource.LoadError {
            throw CommandError.usage("SUPABASE_JWKS_FILE: \(error)")
        } catch {
            throw CommandError.usage("cannot start: \(error)")
        }
        let bound: Int
        do { bound = try await relay.start(untilListening: false) } catch {
            throw CommandError.usage("PORT \(port) on HOST \(host): cannot listen (\(error))")
        }
        logger.info("listening", ["port": String(bound), "instance": configuration.instanceID])
        // SIGTERM and SIGINT drain the relay: the first one starts the graceful stop in a child
        // task, which `relay.run()` outlasts (it returns once every part has stopped).
        let (signals, arrived) = AsyncStream<Int32>.makeStream()
        let sources = [SIGTERM, SIGINT].map { number in SignalHandler.on(number) { arrived.yield(number) } }
        let ended = await withTaskGroup(of: Void.self) { group in
            group.addTask {
                for await number in signals {
                    logger.info("draining", ["signal": String(number)])
                    await relay.shutdown()
                    return
                }
            }
            let ended = await relay.run()
            arrived.finish()  // stopped without a signal (a part ended early): nothing to wait for
            return ended
        }
        sources.forEach { $0.cancel() }
        logger.info("stopped")
        // Nobody asked it to stop: exit non-zero, so that a supervisor restarts it.
        if let ended { throw PartEnded(part: ended) }
    }
}

/// A part of the instance ended by itself and stopped it (logged as `service_ended_early` or
/// `service_failed`): exit 1.
struct PartEnded: Error, CustomStringConvertible {
    let part: String
    var description: String { "stopped because its \(part) ended by itself" }
}

/// A bad command line or configuration: printed with the usage, exit 64.
struct CommandError: Error {
    let message: String
    static func usage(_ message: String) -> CommandError { CommandError(message: message) }
}
