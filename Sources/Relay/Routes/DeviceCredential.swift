import Foundation
import RelayCore

/// Where a phone socket's credential comes from (docs/protocol.md, "The socket from a browser"): the
/// `Authorization` header,
/// or — for browsers, which cannot set headers on a WebSocket — one `Sec-WebSocket-Protocol`
/// entry `whereabot.bearer.<JWT>` offered beside `whereabot.v1`. The token never travels in
/// a URL, and the chosen subprotocol (`whereabot.v1`) never echoes it.
enum DeviceCredential: Equatable {
    /// The subprotocol a browser phone speaks, selected in the 101.
    static let protocolName = "whereabot.v1"
    /// The prefix of the entry that carries the access token.
    static let bearerPrefix = "whereabot.bearer."

    /// An `Authorization` header value to authenticate with (nil: none offered).
    case authorization(String?, selectProtocol: Bool)
    /// The offer is malformed (two bearer entries, a bearer without `whereabot.v1`): 400.
    case malformed

    /// Reads the headers of a `GET /v1/device`.
    static func from(authorization: String?, protocols: String?) -> DeviceCredential {
        let offered = (protocols ?? "").split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }
        let speaksV1 = offered.contains(protocolName)
        let bearers = offered.filter { $0.hasPrefix(bearerPrefix) }
        if let authorization { return .authorization(authorization, selectProtocol: speaksV1) }
        guard !bearers.isEmpty else { return .authorization(nil, selectProtocol: speaksV1) }
        guard bearers.count == 1, speaksV1 else { return .malformed }
        let token = bearers[0].dropFirst(bearerPrefix.count)
        guard !token.isEmpty, token.utf8.count <= PhoneMessage.maximumTokenLength else { return .malformed }
        return .authorization("Bearer " + token, selectProtocol: true)
    }
}
