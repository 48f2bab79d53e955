import Foundation
@testable import Relay
import Testing

/// `whereabot_device` as the relay reads it: the device, its owner (whose sockets the
/// instance looks among), the event and the new socket; a payload without a valid owner is
/// dropped (the instance keeps no index of its sockets by device).
@Suite struct DeviceNotificationTests {
    @Test func aDeviceNotificationNamesItsOwner() {
        let device = UUID(), owner = UUID(), connection = UUID()
        let hello = #"{"device":"\#(device)","owner":"\#(owner)","event":"hello","instance":"relay-b","connection":"\#(connection)"}"#
        #expect(RelayNotification.decode(channel: "whereabot_device", payload: hello)
                == .device(device, owner: owner, event: .hello, connection: connection))
        let revoked = #"{"device":"\#(device)","owner":"\#(owner)","event":"revoked","instance":null}"#
        #expect(RelayNotification.decode(channel: "whereabot_device", payload: revoked)
                == .device(device, owner: owner, event: .revoked, connection: nil))
        for payload in [#"{"device":"\#(device)","event":"revoked","instance":null}"#,
                        #"{"device":"\#(device)","owner":"ada","event":"revoked","instance":null}"#,
                        #"{"device":"\#(device)","owner":null,"event":"revoked","instance":null}"#,
                        #"{"device":"\#(device)","owner":"\#(owner)","event":"gone","instance":null}"#] {
            #expect(RelayNotification.decode(channel: "whereabot_device", payload: payload) == nil, "\(payload)")
        }
    }
}
