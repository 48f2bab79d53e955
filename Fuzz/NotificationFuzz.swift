// libFuzzer entry for RelayNotification.decode (every NOTIFY payload the relay hears).
// The first byte picks the channel. Any crash, hang or sanitizer report is a bug.
import JSON
@testable import Relay
@testable import RelayCore
let fuzzChannels = ["whereabot_i_00000000000000000000000000000000", "whereabot_device", "whereabot_key",
                    "whereabot_replay", "other"]

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzNotification(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    guard size > 0 else { return 0 }
    let channel = fuzzChannels[Int(data[0]) % fuzzChannels.count]
    let payload = String(decoding: UnsafeBufferPointer(start: data + 1, count: size - 1), as: UTF8.self)
    if case .locate(let ping, _)? = RelayNotification.decode(channel: channel, payload: payload), let reason = ping.reason {
        // A ping's reason is always the cleaned text, within its limit (docs/protocol.md,
        // "Consent").
        precondition(reason.unicodeScalars.count <= LocateReason.maximumLength && LocateReason.clean(reason) == reason)
    }
    if case .locate(let ping, _)? = RelayNotification.decode(channel: channel, payload: payload) {
        // What the phone gets reads back as the same ping (the relay's always-allow decision
        // included); only the reply key stays with the relay.
        let phone = LocateMessage(json: JSONValue.parse(ping.phoneJSON)!)
        precondition(phone?.alwaysAllow == ping.alwaysAllow && phone?.id == ping.id, "the phone's form keeps the decision")
    }
    return 0
}
