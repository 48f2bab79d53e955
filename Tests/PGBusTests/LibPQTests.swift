import PGBus
import Testing

/// The link to Debian's libpq works and is usable from several threads.
@Suite struct LibPQTests {
    /// PGBus needs libpq 15 or newer.
    @Test func linkedLibPQIsRecentEnough() {
        #expect(LibPQ.version >= 15_00_00)
    }

    /// libpq must be thread-safe because each connection runs on its own thread.
    @Test func linkedLibPQIsThreadSafe() {
        #expect(LibPQ.isThreadSafe)
    }
}
