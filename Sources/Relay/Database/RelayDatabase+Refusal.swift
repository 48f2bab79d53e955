import PGBus

extension RelayDatabase {
    /// The database refused what a phone asked of its account (no share, a generic agent id,
    /// a limit, an argument it checks): not a failure, and answered as such. Its sentence is
    /// the database's own words about the phone's own input (a quiet-hours window), for the
    /// ones that are `invalid`.
    public struct Refusal: Error, Equatable, Sendable {
        /// Why, as a stable word.
        public enum Reason: String, Sendable {
            /// 42501: the account may not do this.
            case notAllowed = "not_allowed"
            /// 22023, 22004, 23502, 23514: an argument the database refused.
            case invalid
            /// 54000: a limit is reached.
            case limit
            /// P0002: what it names does not exist.
            case notFound = "not_found"
        }

        public let reason: Reason
        /// The database's sentence for an `invalid` argument (nil otherwise).
        public let sentence: String?

        /// The refusal a PGError is, if it is one.
        init?(_ error: PGError) {
            switch error.sqlState {
            case "42501": reason = .notAllowed
            case "22023", "22004", "23502", "23514": reason = .invalid
            case "54000": reason = .limit
            case "P0002": reason = .notFound
            default: return nil
            }
            sentence = error.sqlState == "22023" ? error.primaryMessage : nil
        }
    }

    /// `pool.send` for a phone's account requests: what the database refuses comes back as a
    /// `Refusal`, every other error as it was.
    func account(_ sql: String, _ parameters: [(any PGEncodable)?] = []) async throws -> PGQueryResult {
        do {
            return try await pool.send(sql, parameters)
        } catch let error as PGError {
            throw Refusal(error) ?? error
        }
    }
}
