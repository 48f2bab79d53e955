import Foundation
import JSON
@testable import Relay
@testable import RelayCore
import Testing

/// Push payloads against golden files (Tests/RelayTests/Golden), and their texts.
@Suite struct PushPayloadTests {
    let request = UUID(uuidString: "9b2d6c3e-1f4a-4c5b-8d7e-0a1b2c3d4e5f")!
    let client = "6f1d0c1e-5b1a-4c1e-9a55-0a9f3c1e7b21"
    let ada = Person(userID: UUID(uuidString: "0b7f4a52-3c1d-4e8f-9a6b-5c4d3e2f1a0b")!, name: "Ada", email: "ada@example.com")

    private func golden(_ name: String) throws -> String {
        let url = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("Golden/\(name).json")
        return try String(contentsOf: url, encoding: .utf8).trimmingCharacters(in: .whitespacesAndNewlines)
    }

    private func payload(_ kind: PushPayload.Kind, name: String? = "Claude", requester: Person? = nil) -> PushPayload {
        PushPayload(kind: kind, requestID: request, clientID: client, agentName: name, requester: requester, expiresMs: 1_796_026_200_000)
    }

    /// Every kind, own and shared, and the unknown name, byte for byte.
    @Test func payloadsMatchGoldenFiles() throws {
        let cases: [(String, [UInt8])] = [
            ("apns-alert", payload(.alert).apns()),
            ("apns-alert-shared", payload(.alert, requester: ada).apns()),
            ("apns-alert-unknown-name", payload(.alert, name: nil).apns()),
            ("apns-silent", payload(.silent).apns()),
            ("apns-silent-shared", payload(.silent, requester: ada).apns()),
            ("apns-checking", payload(.checking).apns()),
            ("apns-checking-shared", payload(.checking, requester: ada).apns()),
            ("webpush-alert", payload(.alert).webPush()),
            ("webpush-alert-shared", payload(.alert, requester: ada).webPush()),
            ("webpush-checking", payload(.checking).webPush()),
        ]
        for (name, bytes) in cases {
            #expect(String(decoding: bytes, as: UTF8.self) == (try golden(name)), "\(name)")
        }
    }

    /// The texts of docs/protocol.md, "What a notification says".
    @Test func texts() {
        #expect(payload(.alert).body() == "Your agent Claude wants to know your location")
        #expect(payload(.alert, name: nil).body() == "An agent wants to know your location")
        #expect(payload(.alert, name: "  ").body() == "An agent wants to know your location")
        #expect(payload(.checking).body() == "Claude is checking your location")
        #expect(payload(.alert, requester: ada).body() == "Ada's agent Claude wants to know your location")
        #expect(payload(.checking, requester: ada).body() == "Ada's agent Claude is checking your location")
        #expect(payload(.alert, name: "Evil\u{202E}\nName").body() == "Your agent EvilName wants to know your location")
    }

    /// The same texts in German from the catalog; a language it has no texts in is English.
    @Test func germanTexts() throws {
        #expect(payload(.alert).body("de") == "Dein Agent Claude möchte wissen, wo du bist")
        #expect(payload(.alert, name: nil).body("de") == "Ein Agent möchte wissen, wo du bist")
        #expect(payload(.checking, requester: ada).body("de") == "Der Agent Claude von Ada prüft deinen Standort")
        #expect(payload(.alert).body("xx") == payload(.alert).body())
        let web = try #require(JSONValue.parse(bytes: payload(.alert).webPush("de")))
        #expect(web["body"]?.string == "Dein Agent Claude möchte wissen, wo du bist" && web["title"]?.string == "Whereabot")
        #expect(GrantReminder(clientID: "c", agentName: "Helper", requesterID: nil).text("de")
            == "Helper kann deinen Standort weiterhin ohne Nachfrage abrufen.")
    }

    /// Placeholders are filled in one pass: a name that looks like a placeholder stays text;
    /// a key the catalog lacks is the key itself, and every key has both languages.
    @Test func catalogFillsPlaceholdersOnce() throws {
        let catalog = TextCatalog(json: Array(#"{"en": {"a": "{x} and {y}", "b": "only en"}, "de": {"a": "{y} und {x}"}}"#.utf8))
        #expect(catalog.text("a", language: "de", ["x": "{y}", "y": "2"]) == "2 und {y}")
        #expect(catalog.text("b", language: "de") == "only en" && catalog.text("c", language: "en") == "c")
        #expect(catalog.text("a", language: "en", ["x": "1"]) == "1 and {y}", "a value not given leaves its placeholder")
        #expect(TextCatalog.bundled.knows("en") && TextCatalog.bundled.knows("de"))
        for key in ["push.title", "push.asking", "push.asking.unnamed", "push.asking.shared", "push.asking.shared.unnamed",
                    "push.checking", "push.checking.unnamed", "push.checking.shared", "push.checking.shared.unnamed",
                    "push.with_reason", "push.reminder", "push.reminder.unnamed"] {
            #expect(TextCatalog.bundled.text(key, language: "de") != key, "\(key) in German")
        }
    }

    /// Payloads stay within 4096 (APNs) and 3993 (Web Push) bytes: long names are cut on a
    /// character boundary.
    @Test func sizeLimits() throws {
        let long = String(repeating: "🦊", count: 200)
        let huge = Person(userID: ada.userID, name: String(repeating: "👩‍🚀", count: 80), email: String(repeating: "a", count: 240) + "@x.example")
        let apns = payload(.alert, name: long, requester: huge).apns()
        let web = payload(.alert, name: long, requester: huge).webPush()
        #expect(apns.count <= 4096 && web.count <= 3993)
        let object = try #require(try JSONSerialization.jsonObject(with: Data(web)) as? [String: Any])
        #expect((object["agent_name"] as? String)?.allSatisfy { $0 == "🦊" } == true)
        // No coordinate-like key ever.
        for bytes in [apns, web, payload(.silent).apns()] {
            let text = String(decoding: bytes, as: UTF8.self)
            #expect(!text.contains("latitude") && !text.contains("longitude") && !text.contains("accuracy"))
        }
    }
}
