import Foundation
import HTTPServer
@testable import Relay
@testable import RelayCore
import Testing

/// The browser phone's pure parts: the subprotocol credential, account messages, /app/ files.
@Suite struct BrowserPhoneUnitTests {
    /// The bearer subprotocol becomes an Authorization value; malformed offers are 400.
    @Test func subprotocolCredential() {
        #expect(DeviceCredential.from(authorization: nil, protocols: "whereabot.v1, whereabot.bearer.abc.def.ghi")
            == .authorization("Bearer abc.def.ghi", selectProtocol: true))
        #expect(DeviceCredential.from(authorization: "Bearer x", protocols: nil) == .authorization("Bearer x", selectProtocol: false))
        #expect(DeviceCredential.from(authorization: "Bearer x", protocols: "whereabot.v1")
            == .authorization("Bearer x", selectProtocol: true))
        #expect(DeviceCredential.from(authorization: nil, protocols: nil) == .authorization(nil, selectProtocol: false))
        #expect(DeviceCredential.from(authorization: nil, protocols: "whereabot.bearer.abc") == .malformed, "no whereabot.v1")
        #expect(DeviceCredential.from(authorization: nil, protocols: "whereabot.v1,whereabot.bearer.a,whereabot.bearer.b") == .malformed)
        #expect(DeviceCredential.from(authorization: nil, protocols: "whereabot.v1,whereabot.bearer.") == .malformed)
        let huge = "whereabot.v1,whereabot.bearer." + String(repeating: "a", count: PhoneMessage.maximumTokenLength + 1)
        #expect(DeviceCredential.from(authorization: nil, protocols: huge) == .malformed)
    }

    /// Account messages decode with every field checked; malformed ones are unknown.
    @Test func accountMessages() {
        let requester = UUID()
        #expect(PhoneMessage.parse(#"{"type":"push_subscription","endpoint":"https://fcm.googleapis.com/x","p256dh":"P","auth":"A"}"#)
            == .account(.pushSubscription(endpoint: "https://fcm.googleapis.com/x", p256dh: "P", auth: "A")))
        #expect(PhoneMessage.parse(#"{"type":"push_subscription","endpoint":"https://e/x","keys":{"p256dh":"P","auth":"A"}}"#)
            == .account(.pushSubscription(endpoint: "https://e/x", p256dh: "P", auth: "A")))
        #expect(PhoneMessage.parse(#"{"type":"push_subscription","endpoint":null}"#)
            == .account(.pushSubscription(endpoint: nil, p256dh: "", auth: "")))
        #expect(PhoneMessage.parse(#"{"type":"push_subscription","endpoint":"https://e/x"}"#) == .unknown)
        #expect(PhoneMessage.parse(#"{"type":"push_subscription","endpoint":"https://e/x","p256dh":"P","auth":"A","language":"de-DE"}"#)
            == .account(.pushSubscription(endpoint: "https://e/x", p256dh: "P", auth: "A", language: "de")))
        #expect(PhoneMessage.parse(#"{"type":"push_subscription","endpoint":"https://e/x","p256dh":"P","auth":"A","language":"gsw"}"#)
            == .account(.pushSubscription(endpoint: "https://e/x", p256dh: "P", auth: "A", language: "en")))
        for bad in [#""d""#, #""d3""#, #""de'--""#, "7", #""""#] {
            #expect(PhoneMessage.parse(#"{"type":"push_subscription","endpoint":"https://e/x","p256dh":"P","auth":"A","language":\#(bad)}"#)
                == .unknown, "language \(bad)")
        }
        #expect(PhoneMessage.parse(#"{"type":"always_allow","client_id":"c","client_name":"Claude\n","requester_id":"\#(requester)"}"#)
            == .account(.alwaysAllow(clientID: "c", clientName: "Claude", requesterID: requester)))
        #expect(PhoneMessage.parse(#"{"type":"always_allow","client_id":"c","requester_id":"not-a-uuid"}"#) == .unknown)
        #expect(PhoneMessage.parse(#"{"type":"always_allow","client_id":""}"#) == .unknown)
        #expect(PhoneMessage.parse(#"{"type":"always_allow_remove","client_id":"c"}"#)
            == .account(.alwaysAllowRemove(clientID: "c", requesterID: nil)))
        #expect(PhoneMessage.parse(#"{"type":"always_allow_keep","client_id":"c","requester_id":"\#(requester)"}"#)
            == .account(.alwaysAllowKeep(clientID: "c", requesterID: requester)))
        #expect(PhoneMessage.parse(#"{"type":"always_allow_keep","client_id":""}"#) == .unknown)
        #expect(PhoneMessage.parse(#"{"type":"always_allow_keep","client_id":"c","requester_id":7}"#) == .unknown)
        #expect(PhoneMessage.parse(#"{"type":"devices"}"#) == .account(.listDevices))
        let device = UUID()
        #expect(PhoneMessage.parse(#"{"type":"device_rename","device_id":"\#(device)","name":" Work\u202e "}"#)
            == .account(.renameDevice(device, name: "Work")))
        #expect(PhoneMessage.parse(#"{"type":"device_remove","device_id":"\#(device)"}"#) == .account(.removeDevice(device)))
        #expect(PhoneMessage.parse(#"{"type":"device_remove"}"#) == .unknown)
    }

    /// /app/ serves the bundled files with the page's security headers, config.json from
    /// the settings, and 404 for anything else.
    @Test func appRoutes() throws {
        let app = AppRoutes(publicURL: "http://127.0.0.1:8080", supabaseURL: "https://x.supabase.co", supabaseAnonKey: "anon",
                            vapidPublicKey: "BKEY")
        #expect(app.fileCount >= 10, "the resource bundle is found")
        let index = app.response(method: "GET", path: "/app/")
        #expect(index.status == 200 && index.headers["Content-Type"] == "text/html; charset=utf-8")
        #expect(index.headers["Cache-Control"] == "no-cache")
        #expect(index.headers["Content-Security-Policy"]?.contains("connect-src 'self' https://x.supabase.co;") == true)
        #expect(index.headers["X-Content-Type-Options"] == "nosniff")
        #expect(app.response(method: "GET", path: "/app").headers["Location"] == "/app/")
        #expect(app.response(method: "GET", path: "/app/sw.js").headers["Cache-Control"] == "no-cache")
        #expect(app.response(method: "GET", path: "/app/app.js").headers["Cache-Control"] == nil)
        #expect(app.response(method: "GET", path: "/app/missing.js").status == 404)
        #expect(app.response(method: "GET", path: "/app/../Package.swift").status == 404)
        #expect(app.response(method: "POST", path: "/app/").status == 405)
        var config = try JSONSerialization.jsonObject(with: Data(app.response(method: "GET", path: "/app/config.json").body)) as? [String: Any]
        #expect(config?.removeValue(forKey: "allow_for_s") as? Int == 3600, "how long Allow for 1 hour lasts")
        #expect(config as? [String: String] == ["vapid_public_key": "BKEY", "supabase_url": "https://x.supabase.co",
                                                 "supabase_anon_key": "anon", "public_url": "http://127.0.0.1:8080"])
    }
}
