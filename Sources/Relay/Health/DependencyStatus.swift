import Synchronization

/// Whether one thing outside the instance answers — its database, Supabase Auth's signing
/// keys — and, when not, why, in the words /readyz shows: `database 127.0.0.1:54322:
/// connection refused`, `signing keys https://…/jwks.json: timeout`. Each change between
/// reachable and not (or of the reason) is logged once, as `dependency_down` (warning) or
/// `dependency_up` (info); repeated failures with the same reason log nothing more.
/// Reasons come from fixed lists (`PGError.reason`, `JWKSSource.LoadError`): never a
/// password, token or query.
final class DependencyStatus: Sendable {
    /// What it is (`database`, `signing keys`).
    let name: String
    /// Where it is (a host and port, a URL without userinfo, a path).
    let endpoint: String
    private let reason: Mutex<String?>
    private let logger: Logger

    /// A dependency that is missing for `reason` until it is first reached (nil: reachable).
    init(name: String, endpoint: String, reason: String?, logger: Logger) {
        self.name = name
        self.endpoint = endpoint
        self.reason = Mutex(reason)
        self.logger = logger
    }

    /// It answered.
    func reached() {
        guard reason.withLock({ reason in defer { reason = nil }; return reason != nil }) else { return }
        logger.info("dependency_up", ["dependency": name, "endpoint": endpoint])
    }

    /// It did not answer, for `why`.
    func failed(_ why: String) {
        guard reason.withLock({ reason in defer { reason = why }; return reason != why }) else { return }
        logger.warning("dependency_down", ["dependency": name, "endpoint": endpoint, "reason": why])
    }

    /// Whether it answered last time it was tried.
    var isReachable: Bool { reason.withLock { $0 == nil } }

    /// The /readyz line naming it while it is missing, else nil.
    var missing: String? { reason.withLock { $0 }.map { "\(name) \(endpoint): \($0)" } }
}
