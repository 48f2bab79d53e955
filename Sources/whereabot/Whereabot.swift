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
          version   print the version
          help      print this text
        """

    static func main() async {
        let arguments = Array(CommandLine.arguments.dropFirst())
        switch arguments.first {
        case "serve":
            do {
                try await ServeCommand.run(environment: ProcessInfo.processInfo.environment)
            } catch let error as CommandError {
                FileHandle.standardError.write(Data("whereabot serve: \(error.message)\n".utf8))
                exit(64)
            } catch {
                FileHandle.standardError.write(Data("whereabot serve: \(error)\n".utf8))
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
