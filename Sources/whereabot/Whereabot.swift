import Foundation
import Relay

/// The `whereabot` command: `serve`, `phone`, `token` and `keys` arrive with their issues.
@main
struct Whereabot {
    /// The usage text printed by `help` and on a bad command line.
    static let usage = """
        usage: whereabot <command>

        commands:
          serve     run a relay instance (configuration from the environment; see README)
          token     --email E [--name N] [--agent CLIENT_NAME] [--app-link [--relay URL]]: a development JWT
                    (phone, or agent); --app-link prints a link that signs the browser phone in (after a confirmation naming the account)
          keys      create --email E --name N | revoke ID: agent keys (the key prints once)
          phone     --relay URL --token T --answer allow|always|deny|ignore|unavailable|ask: a reference phone
          openapi   print the OpenAPI 3.1 description of the HTTP API (docs/openapi.yaml)
          vapid-keys  print a new VAPID key pair for Web Push (VAPID_PRIVATE_KEY and the public key)
          version   print the version
          help      print this text
        """

    static func main() async {
        let arguments = Array(CommandLine.arguments.dropFirst())
        switch arguments.first {
        case "token", "keys", "phone":
            let options = Options(Array(arguments.dropFirst()))
            let environment = ProcessInfo.processInfo.environment
            do {
                switch arguments[0] {
                case "token": try await TokenCommand.token(options, environment: environment)
                case "keys": try await TokenCommand.keys(options.positional, options, environment: environment)
                default: try await PhoneCommand.run(options, environment: environment)
                }
            } catch let error as CommandError {
                FileHandle.standardError.write(Data("whereabot \(arguments[0]): \(error.message)\n".utf8))
                exit(64)
            } catch {
                FileHandle.standardError.write(Data("whereabot \(arguments[0]): \(error)\n".utf8))
                exit(1)
            }
        case "serve":
            // Log lines go out through a buffer of their own: what is queued is written
            // before the process ends, however it ends.
            defer { LogWriter.standardError.flush() }
            do {
                try await ServeCommand.run(environment: ProcessInfo.processInfo.environment)
            } catch let error as CommandError {
                LogWriter.standardError.flush()
                FileHandle.standardError.write(Data("whereabot serve: \(error.message)\n".utf8))
                exit(64)
            } catch {
                LogWriter.standardError.flush()
                FileHandle.standardError.write(Data("whereabot serve: \(error)\n".utf8))
                exit(1)
            }
        case "openapi":
            print(OpenAPIDocument.yaml, terminator: "")
        case "vapid-keys":
            do { print(try VAPIDKeysCommand.run()) } catch {
                FileHandle.standardError.write(Data("whereabot vapid-keys: \(error)\n".utf8))
                exit(1)
            }
        case "version", "--version":
            print("whereabot \(Relay.version)")
        case "help", "--help", "-h":
            print(usage)
        case let command:
            let message = command.map { "whereabot: unknown command '\($0)'\n" } ?? ""
            FileHandle.standardError.write(Data((message + usage + "\n").utf8))
            exit(64)  // EX_USAGE
        }
    }
}
