import PGBus
import Testing

/// The link to Debian's libpq works and is usable from several threads.
@Suite struct LibPQTests {
    /// PGBus needs libpq 15 or newer (pipeline mode, PQsetnonblocking behaviour).
    @Test func linkedLibPQIsRecentEnough() {
        #expect(LibPQ.version >= 15_00_00)
    }

    /// libpq must be thread-safe because queries run off the caller's thread.
    @Test func linkedLibPQIsThreadSafe() {
        #expect(LibPQ.isThreadSafe)
    }
}
