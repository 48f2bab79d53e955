import Crypto
import Foundation
import HTTPServer
import JSON
import PGBus
import Push
import Relay
import RelayCore

/// `whereabot phone`: the reference device. It connects to /v1/device, says hello, answers
/// every ping as told (`ask` prompts in the terminal), honours cancel, and reconnects with
/// backoff, except after close 4000 (replaced or revoked), as the app must. A relay that
/// says when to come back — 429 or 503 with `Retry-After` before the upgrade, or close 1013
/// with `retry after N` — is obeyed instead of the backoff.
enum PhoneCommand {
    enum Mode: String {
        case allow, always, deny, ignore, unavailable, ask, approximate
    }

    static let usage = """
        whereabot phone --relay URL --token T [--device-id ID] [--device-name N] [--platform P]
                        --answer allow|approximate|always|deny|ignore|unavailable|ask [--at LAT,LON[,ACC]]
                        [--apns-token HEX [--apns-environment production|sandbox]] [--settings FILE]
        --settings reads places (matched here, never sent: inside one shared by name only, an
        allow answers with its name and no position) and quiet-hours windows (set at the
        relay after each hello) from a JSON file (PhoneSettings.swift shows its shape).
        --apns-token stores an APNs device token for this device (development, with the fake
        APNs): it needs ADMIN_DATABASE_URL and writes as the token's user, under RLS.
        """

    static func run(_ options: Options, environment: [String: String] = [:]) async throws {
        guard let relay = options["relay"], let token = options["token"],
              let mode = Mode(rawValue: options["answer"] ?? "") else { throw CommandError.usage(usage) }
        let device = options["device-id"].flatMap(UUID.init(uuidString:)) ?? UUID()
        let at = (options["at"] ?? "52.520008,13.404954,12").split(separator: ",").compactMap { Double($0) }
        guard at.count >= 2 else { throw CommandError.usage("--at is LAT,LON[,ACC]") }
        let settings = try options["settings"].map(PhoneSettings.load) ?? .empty
        let url = relay.replacingOccurrences(of: "http://", with: "ws://").trimmingCharacters(in: CharacterSet(charactersIn: "/")) + "/v1/device"
        var delay = 1.0
        while true {
            var told: Int?  // seconds the relay asked us to wait
            do {
                let socket = try await WebSocketClient.connect(url, headers: [("Authorization", "Bearer " + token)])
                delay = 1
                let hello: JSONValue = ["type": "hello", "app_version": "whereabot-cli", "device_id": .string(device.uuidString.lowercased()),
                                        "device_name": .string(options["device-name"] ?? "whereabot phone"),
                                        "platform": .string(options["platform"] ?? "desktop")]
                socket.send(hello.text)
                say("connected as device \(device.uuidString.lowercased()); answering: \(mode.rawValue)")
                if let windows = settings.quietHours {
                    let message: JSONValue = ["type": "quiet_hours", "windows": windows]
                    socket.send(message.text)
                }
                if let apnsToken = options["apns-token"] {
                    try await registerAPNsToken(apnsToken, environment: options["apns-environment"] ?? "production",
                                                device: device, token: token, settings: environment)
                    say("stored APNs token \(apnsToken.prefix(8))… for this device")
                }
                for await message in socket.messages {
                    guard case .text(let text) = message,
                          let object = JSONValue.parse(text), let type = object["type"]?.string else { continue }
                    if type == "quiet_hours" { say("quiet hours at the relay: \(QuietText.describe(object["windows"]))"); continue }
                    if type == "error", let sentence = object["message"]?.string { say("the relay refused: \(sentence)"); continue }
                    guard let id = object["id"]?.string else { continue }
                    if type == "cancel" { say("request \(id.prefix(8)) cancelled (answered elsewhere or timed out)"); continue }
                    guard type == "locate" else { continue }
                    if let reply = answer(id: id, ping: object, mode: mode, at: at, settings: settings) { socket.send(reply.text) }
                }
                say("disconnected: \(socket.closeCode ?? 1006) \(socket.closeReason)")
                if socket.closeCode == 4000 { return }  // replaced or revoked: do not reconnect
                if socket.closeCode == WebSocketCloseCode.tryAgainLater { told = RetryLaterSocket.seconds(inReason: socket.closeReason) }
            } catch WebSocketClient.ConnectError.tryAgainLater(let status, let seconds, let body) {
                say("refused for now: \(status) \(body)")
                told = seconds
            } catch WebSocketClient.ConnectError.rejected(let status, let body) {
                say("refused: \(status) \(body)")
                if status == 401 || status == 403 { throw CommandError.usage("the relay refused the token (\(status))") }
            } catch {
                say("cannot connect: \(error)")
            }
            if let told {
                say("the relay asked to come back in \(told) s")
                try await Task.sleep(for: .seconds(Double(min(told, 3600)) * Double.random(in: 1...1.1)))
                continue
            }
            try await Task.sleep(for: .seconds(delay * Double.random(in: 0.5...1)))
            delay = min(delay * 2, 30)
        }
    }

    private static func answer(id: String, ping: JSONValue, mode: Mode, at: [Double], settings: PhoneSettings) -> JSONValue? {
        let expires = ping["expires_ms"]?.number ?? 0
        let left = max(0, Int((expires / 1000 - Date().timeIntervalSince1970).rounded()))
        // The agent by the name the ping gives, as the app and the alert push name it.
        let prompt = PromptText.asking(agentName: ping["agent_name"]?.string, requester: ping["requester"]?["name"]?.string)
        say("request \(id.prefix(8)): \(prompt), \(left)s left")
        // The agent's own words, quoted; a terminal shows it as text (controls were cleaned by the relay).
        if let reason = ping["reason"]?.string { say("  the agent says: \"\(reason.filter { !$0.isNewline })\"") }
        var chosen = mode
        if mode == .ask {
            say("share your location? [a]llow / [s]hare approximate / [d]eny / [i]gnore: ", newline: false)
            switch readLine()?.lowercased().first {
            case "a": chosen = .allow
            case "s": chosen = .approximate
            case "d": chosen = .deny
            default: chosen = .ignore
            }
        }
        // Inside a place of the settings, the place decides how much is shared.
        let place = chosen == .allow || chosen == .always || chosen == .approximate ? settings.place(at: at[0], at[1]) : nil
        switch place?.share {
        case .name?:
            say("  inside \(place!.name): sharing the place's name only")
            return ["type": "location", "id": .string(id), "precision": "place", "place": .string(place!.name),
                    "timestamp_ms": JSONValue(Int64(Date().timeIntervalSince1970 * 1000))]
        case .approximate?: chosen = .approximate
        case .precise?, nil: break
        }
        switch chosen {
        case .allow, .always:
            return ["type": "location", "id": .string(id), "latitude": .number(at[0]), "longitude": .number(at[1]),
                    "accuracy_m": .number(at.count > 2 ? at[2] : 10), "timestamp_ms": JSONValue(Int64(Date().timeIntervalSince1970 * 1000))]
        case .approximate:
            // The centre of the grid cell that holds the fix, at least 3 km accurate (docs/protocol.md, "Consent").
            return ["type": "location", "id": .string(id), "latitude": .number(LocationFix.cellCentre(at[0], limit: 90)),
                    "longitude": .number(LocationFix.cellCentre(at[1], limit: 180)),
                    "accuracy_m": .number(max(LocationFix.approximateAccuracyM, at.count > 2 ? at[2] : 10)),
                    "precision": "approximate", "timestamp_ms": JSONValue(Int64(Date().timeIntervalSince1970 * 1000))]
        case .deny: return ["type": "denied", "id": .string(id), "reason": "user"]
        case .unavailable: return ["type": "unavailable", "id": .string(id), "reason": "no_fix"]
        case .ignore, .ask: return nil
        }
    }

    /// Stores `hex` in public.push_tokens for `device` as the token's user (RLS decides,
    /// as PostgREST would for the app). The device row exists once the hello was taken.
    private static func registerAPNsToken(_ hex: String, environment apnsEnvironment: String, device: UUID, token: String,
                                          settings: [String: String]) async throws {
        let parts = token.split(separator: ".")
        guard parts.count == 3, let claims = Base64URL.decode(String(parts[1])),
              let json = String(bytes: claims, encoding: .utf8) else { throw CommandError.usage("--token is not a JWT") }
        try await TokenCommand.withAdminConnection(settings) { db in
            // RLS admits the row once the relay has taken the hello (the device row exists):
            // refused (42501) until then, so try again for up to 5 s.
            for attempt in 1...50 {
                do {
                    try await db.asUser(claims: PGJSON(text: json)) { connection in
                        _ = try await connection.query(
                            "insert into public.push_tokens (token, user_id, device_id, environment) "
                                + "values (lower($1), (select auth.uid()), $2, $3) on conflict (token) do nothing",
                            [hex, device, apnsEnvironment])
                    }
                    return
                } catch let error as PGError where error.isInsufficientPrivilege && attempt < 50 {
                    try await Task.sleep(for: .milliseconds(100))
                }
            }
        }
    }

    /// Writes a line to stdout at once (a pipe would otherwise buffer it).
    private static func say(_ text: String, newline: Bool = true) {
        FileHandle.standardOutput.write(Data((text + (newline ? "\n" : "")).utf8))
    }

}
