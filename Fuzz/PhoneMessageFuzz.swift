// libFuzzer entry for PhoneMessage.parse (every frame and POST body a phone sends) and the
// browser phone's Sec-WebSocket-Protocol header (DeviceCredential: the input as the header). Any
// crash (an unchecked numeric conversion, a trap), hang or sanitizer report is a bug; a
// location answer that decodes must be in range.
@testable import Relay
@testable import RelayCore

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzPhoneMessage(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let text = String(decoding: UnsafeBufferPointer(start: data, count: size), as: UTF8.self)
    if case .answer(_, .location(let latitude, let longitude, let accuracy, let timestamp, _, _, let heading, let precision))? =
        PhoneMessage.parse(text) {
        precondition((-90...90).contains(latitude) && (-180...180).contains(longitude) && accuracy >= 0 && timestamp > 0)
        precondition(heading.map { (0..<360).contains($0) } ?? true)
        // An approximate answer is never sharper than a grid cell (docs/protocol.md,
        // "Consent").
        precondition(precision == .precise || accuracy >= LocationFix.approximateAccuracyM)
    }
    if case .authorization(let authorization?, _) = DeviceCredential.from(authorization: nil, protocols: text) {
        precondition(authorization.hasPrefix("Bearer ") && authorization.utf8.count <= PhoneMessage.maximumTokenLength + 7)
    }
    return 0
}
