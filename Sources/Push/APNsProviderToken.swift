import Crypto
import Foundation
import Synchronization

/// The APNs provider token (an ES256 JWT with `kid` and `iss`), one per process, reused by
/// every connection and stream (docs/protocol.md, "APNs"):
/// - regenerated when `refreshAge` (50 min) old — APNs refuses tokens over an hour old;
/// - never regenerated within `minimumAge` (20 min) of the last — APNs answers
///   `TooManyProviderTokenUpdates` to faster changes — not even on `ExpiredProviderToken`
///   (then the cause is clock skew);
/// - an `ExpiredProviderToken` renews at most once per generation, however many streams
///   report it.
public final class APNsProviderToken: Sendable {
    /// Age at which the token is replaced before use.
    public static let refreshAge: TimeInterval = 3000
    /// The least age at which a token may be replaced.
    public static let minimumAge: TimeInterval = 1200

    /// One minted token.
    public struct Minted: Sendable, Equatable {
        /// The JWT (never logged).
        public let token: String
        /// When it was issued (its `iat`).
        public let issuedAt: Date
        /// Counts regenerations, so that many failures of one token renew it once.
        public let generation: Int
    }

    /// What `expired(generation:)` did.
    public enum Renewal: Sendable, Equatable {
        /// A new token was minted: retry with it.
        case renewed(Minted)
        /// Another failure renewed it already: retry with this one.
        case alreadyRenewed(Minted)
        /// The token is younger than `minimumAge`: APNs and this clock disagree; do not retry.
        case tooSoon
    }

    private let keyID: String
    private let teamID: String
    private let key: P256Key
    private let clock: @Sendable () -> Date
    private let state = Mutex<Minted?>(nil)

    /// A token source for key `keyID` of team `teamID`; `clock` is injectable for tests.
    public init(keyID: String, teamID: String, key: P256Key, clock: @escaping @Sendable () -> Date = Date.init) {
        self.keyID = keyID
        self.teamID = teamID
        self.key = key
        self.clock = clock
    }

    /// The token to send now (minting one when none is cached or it reached `refreshAge`).
    public func current() throws -> Minted {
        try state.withLock { cached in
            let now = clock()
            if let token = cached, now.timeIntervalSince(token.issuedAt) < Self.refreshAge { return token }
            let minted = try mint(now: now, generation: (cached?.generation ?? 0) + 1)
            cached = minted
            return minted
        }
    }

    /// APNs answered `ExpiredProviderToken` to a push sent with token `generation`.
    public func expired(generation: Int) throws -> Renewal {
        try state.withLock { cached in
            let now = clock()
            guard let token = cached else { return .tooSoon }
            if token.generation != generation { return .alreadyRenewed(token) }
            guard now.timeIntervalSince(token.issuedAt) >= Self.minimumAge else { return .tooSoon }
            let minted = try mint(now: now, generation: generation + 1)
            cached = minted
            return .renewed(minted)
        }
    }

    private func mint(now: Date, generation: Int) throws -> Minted {
        let issuedAt = Date(timeIntervalSince1970: now.timeIntervalSince1970.rounded(.down))
        let token = try ES256JWT.sign(header: #"{"alg":"ES256","kid":\#(ES256JWT.quoted(keyID))}"#,
                                      claims: #"{"iss":\#(ES256JWT.quoted(teamID)),"iat":\#(Int(issuedAt.timeIntervalSince1970))}"#,
                                      key: key)
        return Minted(token: token, issuedAt: issuedAt, generation: generation)
    }
}
