import Crypto
import Foundation
@testable import Relay

// libFuzzer entry for JWTVerifier (the header and claims of every bearer token). The
// input is used as a whole token and, base64url-encoded, as a header and as claims signed
// with the known secret, so the claim checks are reached too — both Supabase's and those of
// the relay's own access tokens (`JWTVerifier(relayKey:…)`, chosen by `issuer(of:)`). Any
// crash, hang or sanitizer report is a bug; a token that verifies must carry a session, and
// one of the relay's a client id.
let fuzzSecret = "fuzz-secret-with-at-least-32-characters!!"
let fuzzVerifier = try! JWTVerifier(hmacSecret: fuzzSecret)
let fuzzRelayVerifier = JWTVerifier(relayKey: Array(fuzzSecret.utf8), issuer: "https://relay.example",
                                    audiences: ["https://relay.example/mcp", "https://relay.example"])

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzJWT(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let bytes = Array(UnsafeBufferPointer(start: data, count: size))
    _ = try? fuzzVerifier.verify(String(decoding: bytes, as: UTF8.self), now: Date())
    _ = JWTVerifier.keyID(of: String(decoding: bytes, as: UTF8.self))
    _ = JWTVerifier.issuer(of: String(decoding: bytes, as: UTF8.self))
    let header = Base64URL.encode(Array(#"{"alg":"HS256","typ":"JWT"}"#.utf8))
    let signed = header + "." + Base64URL.encode(bytes)
    let signature = fuzzHMAC(Array(signed.utf8))
    if let claims = try? fuzzVerifier.verify(signed + "." + Base64URL.encode(signature), now: Date(timeIntervalSince1970: 0)) {
        _ = claims.sessionID
    }
    if let claims = try? fuzzRelayVerifier.verify(signed + "." + Base64URL.encode(signature), now: Date(timeIntervalSince1970: 0)) {
        precondition(claims.clientID != nil)
    }
    _ = JWTVerifier.issuer(of: signed + "." + Base64URL.encode(signature))
    _ = try? fuzzVerifier.verify(Base64URL.encode(bytes) + ".e30.", now: Date())
    return 0
}

/// HMAC-SHA256 with the fuzz secret, so that fuzzed claims pass the signature check.
func fuzzHMAC(_ message: [UInt8]) -> [UInt8] {
    Digest.hmacSHA256(key: Array(fuzzSecret.utf8), message)
}
