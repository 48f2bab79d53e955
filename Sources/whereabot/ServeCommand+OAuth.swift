import Foundation
import Relay

extension ServeCommand {
    /// The agents' authorization server's settings from the OAUTH_* variables, each range-checked.
    static func oauthSettings(_ value: (String) -> String?) throws -> OAuthSettings {
        var settings = OAuthSettings()
        func number(_ name: String, _ range: ClosedRange<Int>) throws -> Int? {
            guard let text = value(name) else { return nil }
            guard let number = Int(text), range.contains(number) else {
                throw CommandError.usage("\(name) must be a whole number from \(range.lowerBound) to \(range.upperBound)")
            }
            return number
        }
        if let seconds = try number("OAUTH_ACCESS_TOKEN_SECONDS", 60...86_400) { settings.accessTokenSeconds = seconds }
        if let days = try number("OAUTH_REFRESH_TOKEN_DAYS", 1...365) { settings.refreshTokenDays = days }
        if let days = try number("OAUTH_STALE_CLIENT_DAYS", 1...3650) { settings.staleClientDays = days }
        if let flag = value("OAUTH_CIMD_ALLOW_LOOPBACK") {
            guard flag == "0" || flag == "1" else { throw CommandError.usage("OAUTH_CIMD_ALLOW_LOOPBACK must be 0 or 1") }
            settings.documentsFromLoopback = flag == "1"
        }
        if let file = value("OAUTH_CIMD_CA_FILE") {
            guard FileManager.default.isReadableFile(atPath: file) else {
                throw CommandError.usage("OAUTH_CIMD_CA_FILE \(file) cannot be read")
            }
            settings.documentCAFile = file
        }
        return settings
    }
}
