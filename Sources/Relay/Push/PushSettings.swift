import Crypto
import Foundation
import Push
import RelayCore

/// Push settings from the environment (docs/operations.md, "Configuration"). APNs is on only when `APNS_KEY_ID`,
/// `APNS_TEAM_ID`, `APNS_TOPIC` and `APNS_PRIVATE_KEY` or `APNS_PRIVATE_KEY_FILE` are all
/// set; Web Push only with `VAPID_PRIVATE_KEY` and `VAPID_SUBJECT`. A value that cannot
/// work stops `serve` at start with an error naming the variable (never its value).
public enum PushSettings {
    /// A setting that cannot work.
    public struct Invalid: Error, CustomStringConvertible, Equatable {
        /// The environment variable.
        public let variable: String
        /// What is wrong with it.
        public let problem: String
        /// "VARIABLE: problem".
        public var description: String { "\(variable): \(problem)" }
    }

    /// The services the environment configures (each nil when off).
    public static func services(from environment: [String: String], timing: PushTiming = PushTiming()) throws -> PushServices {
        func value(_ name: String) -> String? { environment[name].flatMap { $0.isEmpty ? nil : $0 } }
        var timing = timing
        if let text = value("REALERT_SECONDS") {
            // 0 turns the re-alert off; else at most the longest request (120 s).
            guard let seconds = Int(text), (0...120).contains(seconds) else {
                throw Invalid(variable: "REALERT_SECONDS", problem: "must be a whole number from 0 (no re-alert) to 120")
            }
            timing.realertDelay = seconds == 0 ? nil : TimeInterval(seconds)
        }
        let caFile = value("PUSH_CA_FILE")
        if let caFile, !FileManager.default.isReadableFile(atPath: caFile) {
            throw Invalid(variable: "PUSH_CA_FILE", problem: "cannot read the file")
        }
        let apns = try apnsConfiguration(value)
        let vapid = try vapidToken(value)
        let origins = try (value("WEB_PUSH_ALLOWED_ORIGINS") ?? "").split(separator: ",").map { entry in
            let origin = entry.trimmingCharacters(in: .whitespaces)
            guard VAPIDToken.origin(of: origin) == origin.lowercased() else {
                throw Invalid(variable: "WEB_PUSH_ALLOWED_ORIGINS", problem: "each entry must be an https origin such as https://127.0.0.1:8443")
            }
            return origin
        }
        let budgets = try PushBudgets.from(environment)
        guard apns != nil || vapid != nil else {
            return PushServices(apns: nil, webPush: nil, transport: nil, timing: timing, budgets: budgets)
        }
        let transport: CurlTransport
        do { transport = try CurlTransport(caFile: caFile) } catch {
            throw Invalid(variable: "APNS_KEY_ID", problem: "the push transport cannot start")
        }
        return PushServices(
            apns: apns.map { APNsSender(configuration: $0, transport: transport, minimumLeft: timing.minimumLeft) },
            webPush: vapid.map { WebPushSender(vapid: $0, transport: transport, extraOrigins: origins, minimumLeft: timing.minimumLeft) },
            transport: transport, timing: timing, budgets: budgets, webPushOrigins: origins.map { $0.lowercased() })
    }

    private static func apnsConfiguration(_ value: (String) -> String?) throws -> APNsSender.Configuration? {
        guard let keyID = value("APNS_KEY_ID"), let teamID = value("APNS_TEAM_ID"), let topic = value("APNS_TOPIC"),
              value("APNS_PRIVATE_KEY") != nil || value("APNS_PRIVATE_KEY_FILE") != nil else { return nil }
        for (name, text) in [("APNS_KEY_ID", keyID), ("APNS_TEAM_ID", teamID)]
        where !(1...32).contains(text.count) || !text.allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber) }) {
            throw Invalid(variable: name, problem: "must be 1 to 32 letters and digits, as Apple shows it")
        }
        guard (1...255).contains(topic.count), topic.allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber || ".-_".contains($0)) }) else {
            throw Invalid(variable: "APNS_TOPIC", problem: "must be the app's bundle id")
        }
        let environment = value("APNS_ENVIRONMENT") ?? "production"
        guard ["production", "sandbox"].contains(environment) else {
            throw Invalid(variable: "APNS_ENVIRONMENT", problem: "must be production or sandbox")
        }
        let pem: String
        let keyVariable: String
        if let inline = value("APNS_PRIVATE_KEY") {
            (pem, keyVariable) = (inline.replacingOccurrences(of: "\\n", with: "\n"), "APNS_PRIVATE_KEY")
        } else {
            keyVariable = "APNS_PRIVATE_KEY_FILE"
            guard let data = FileManager.default.contents(atPath: value(keyVariable)!), data.count < 16_384 else {
                throw Invalid(variable: keyVariable, problem: "cannot read the .p8 file")
            }
            pem = String(decoding: data, as: UTF8.self)
        }
        let key: P256Key
        do { key = try P256Key(pem: pem) } catch {
            throw Invalid(variable: keyVariable, problem: "not a P-256 private key in PEM (the .p8 file from Apple)")
        }
        let url = value("APNS_URL")
        if let url, VAPIDToken.origin(of: url) == nil {
            throw Invalid(variable: "APNS_URL", problem: "must be an https URL")
        }
        return APNsSender.Configuration(keyID: keyID, teamID: teamID, topic: topic, key: key, environment: environment,
                                        baseURL: url.map { $0.hasSuffix("/") ? String($0.dropLast()) : $0 })
    }

    private static func vapidToken(_ value: (String) -> String?) throws -> VAPIDToken? {
        guard let encoded = value("VAPID_PRIVATE_KEY"), let subject = value("VAPID_SUBJECT") else { return nil }
        let key: P256Key
        do {
            guard let scalar = Base64URL.decode(encoded) else { throw CryptoError.badKey }
            key = try P256Key(rawPrivate: scalar)
        } catch {
            throw Invalid(variable: "VAPID_PRIVATE_KEY", problem: "not a base64url P-256 private key (see `whereabot vapid-keys`)")
        }
        do { return try VAPIDToken(key: key, subject: subject) } catch {
            throw Invalid(variable: "VAPID_SUBJECT", problem: "must be mailto:you@your-domain or an https URL")
        }
    }
}
