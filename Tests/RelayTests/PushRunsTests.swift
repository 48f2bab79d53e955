import Foundation
@testable import Relay
import Testing

/// What the driver holds for a request's pushes: a send starts after the request's send
/// before it (the checking alert never overtakes the wake) and only the newest is kept; a
/// request that pushes no more forgets its claim and stops its timer; once finished no
/// send starts, and the sends under way are handed over to be waited for.
@Suite struct PushRunsTests {
    let id = UUID()

    @Test func sendsOfARequestGoOneAfterTheOther() async throws {
        var runs = PushRuns()
        let claim = try #require(PushClaim(json: ["status": "already"]))
        runs.claimed(id, claim)
        #expect(runs.claim(of: id) == claim)
        var previousOfSecond: Task<Void, Never>??
        var numbers: [Int] = []
        let first = Task<Void, Never> {}
        runs.send(id) { previous, number in
            #expect(previous == nil, "the first send waits for nobody")
            numbers.append(number)
            return first
        }
        runs.send(id) { previous, number in
            previousOfSecond = previous
            numbers.append(number)
            return Task {}
        }
        #expect(previousOfSecond == .some(first), "the second waits for the first")
        runs.sent(id, numbers[0])
        #expect(runs.finish().count == 1, "the first's end does not drop the second")
        #expect(runs.finished)
    }

    @Test func aRequestThatPushesNoMoreStopsItsTimer() async throws {
        var runs = PushRuns()
        let fired = FiredFlag()
        runs.arm(id, RelayTimers(loop: nil).after(.milliseconds(50)) { await fired.set() })
        runs.claimed(id, try #require(PushClaim(json: ["status": "already"])))
        runs.done(id)
        #expect(runs.claim(of: id) == nil)
        try await Task.sleep(for: .milliseconds(150))
        #expect(await !fired.value, "the timer was stopped")
        runs.send(id) { _, _ in nil }  // a send refused by its owner keeps nothing
        #expect(runs.finish().isEmpty)
    }
}

private actor FiredFlag {
    var value = false
    func set() { value = true }
}
