@testable import Relay
import Testing

/// The memory of logged credential errors has a bound.
@Suite struct PushDispatcherTests {
    @Test func loggedAuthErrorsAreBounded() {
        var seen = Set<String>()
        #expect(PushDispatcher.firstTime("a", in: &seen, limit: 2))
        #expect(!PushDispatcher.firstTime("a", in: &seen, limit: 2), "logged once")
        #expect(PushDispatcher.firstTime("b", in: &seen, limit: 2))
        #expect(!PushDispatcher.firstTime("b", in: &seen, limit: 2), "a known key at the bound keeps the memory")
        #expect(PushDispatcher.firstTime("c", in: &seen, limit: 2))
        #expect(seen == ["c"], "a new key past the bound starts over")
    }
}
