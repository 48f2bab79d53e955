import Foundation
@testable import Relay
import Testing

/// The polls of durable requests waiting on an instance: an answer wakes every poll
/// sleeping for its request and no other; one that arrives while a poll reads the row
/// marks it woken (the poll reads again rather than sleeping through it), until its next
/// read; a poll that stops sleeping (its wait ran out) is resumed once.
@Suite struct PollWatchersTests {
    @Test func anAnswerWakesItsSleepingPollsAndMarksAReadingOne() async {
        var polls = PollWatchers()
        let id = UUID(), other = UUID()
        polls.pollStarted(id)
        polls.reading(id)
        #expect(polls.wake(id).isEmpty && polls.wasWoken(id), "answered while reading: read again")
        polls.reading(id)
        #expect(!polls.wasWoken(id), "a new read clears the mark")

        // Two polls of `id` and one of `other` sleep; the answer of `id` wakes its two.
        let box = Box()
        let sleepers = [(id, UUID()), (id, UUID()), (other, UUID())].map { request, key in
            Task { await box.sleep(request, key); return request }
        }
        while await box.polls.sleeping < 3 { await Task.yield() }
        await box.wake(id)
        let first = await sleepers[0].value, second = await sleepers[1].value
        #expect(first == id && second == id)
        #expect(await box.polls.sleeping == 1, "the other request's poll sleeps on")
        await box.wake(other)
        #expect(await sleepers[2].value == other)
        polls.pollEnded(id)
        polls.pollStarted(id)
        #expect(!polls.wasWoken(id), "the mark lives only as long as a poll")
    }

    @Test func aPollThatStopsSleepingIsResumedOnce() async {
        var polls = PollWatchers()
        let id = UUID(), key = UUID()
        await withCheckedContinuation { continuation in
            polls.sleep(id, key, continuation)
            polls.stop(id, key)?.resume()
        }
        #expect(polls.stop(id, key) == nil && polls.wake(id).isEmpty && polls.sleeping == 0)
    }
}

/// The watchers behind an actor, as the driver holds them.
private actor Box {
    var polls = PollWatchers()

    func sleep(_ id: UUID, _ key: UUID) async {
        await withCheckedContinuation { polls.sleep(id, key, $0) }
    }

    func wake(_ id: UUID) {
        for continuation in polls.wake(id) { continuation.resume() }
    }
}
