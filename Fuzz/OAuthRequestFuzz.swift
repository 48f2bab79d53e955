// libFuzzer entry for what the agents' authorization server reads from a peer: a token or
// revocation form (x-www-form-urlencoded), the query of /oauth/authorize, registration
// metadata and client metadata documents (JSON), redirect URIs, PKCE verifiers, Basic
// credentials and Cache-Control lines. The first byte picks the decoder. Any crash, hang or
// sanitizer report is a bug; so is a form that repeats a name, or a matched redirect URI
// that could not have been registered.
import Fetch
import Foundation
import HTTPServer
import JSON
@testable import Relay

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzOAuthRequest(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    guard size > 0 else { return 0 }
    let bytes = Array(UnsafeBufferPointer(start: data + 1, count: size - 1))
    let text = String(decoding: bytes, as: UTF8.self)
    switch data[0] % 5 {
    case 0:
        if let form = FormFields(body: bytes) {
            precondition(form.values.count <= FormFields.maximumFields)
            _ = form["grant_type"].flatMap { PKCE.challenge(ofVerifier: $0) }
        }
    case 1:
        if let json = JSONValue.parse(bytes: bytes) {
            let metadata = OAuthClient.fromMetadata(json, id: "wbc_fuzz", kind: .registered,
                                                    allowedMethods: [.none, .secretPost, .secretBasic], defaultMethod: .secretBasic,
                                                    secretDigest: { _ in nil })
            if case .success(let client) = metadata {
                precondition(client.redirectURIs.allSatisfy(RedirectURI.isRegistrable))
                precondition(client.name.count <= OAuthClient.maximumNameLength)
            }
        }
        _ = ClientDocuments.client(document: Data(bytes), url: "https://agent.example/client.json")
    case 2:
        let halves = text.split(separator: "\n", maxSplits: 1).map(String.init)
        if halves.count == 2, RedirectURI.matches(registered: halves[0], requested: halves[1]) {
            precondition(RedirectURI.isRegistrable(halves[1]))
        }
        _ = RedirectURI.displayHost(text)
        _ = ClientDocuments.isDocumentURL(text)
    case 3:
        _ = PKCE.challenge(ofVerifier: text)
        _ = PKCE.isChallenge(text)
        _ = HTTPGet.maxAge(text)
    default:
        if let form = FormFields(Substring(text)) { _ = form["client_id"] }
    }
    return 0
}
