@testable import PGBus
import Testing

/// The listener's lifecycle without I/O.
@Suite struct ListenerStateMachineTests {
    func machine() -> ListenerStateMachine {
        ListenerStateMachine(backoff: PGBackoff(initial: .seconds(1), maximum: .seconds(30)), random: { 1 })
    }

    /// Start connects; a connection LISTENs everything and resyncs.
    @Test func startConnectsThenListens() {
        var m = machine()
        #expect(m.start() == .connect)
        #expect(m.connected() == .listenAllAndResync)
        #expect(m.state == .listening)
        #expect(m.start() == .none)
    }

    /// A lost good connection reconnects at once; repeated failures back off up to the cap.
    @Test func lossReconnectsAtOnceThenBacksOff() {
        var m = machine()
        _ = m.start(); _ = m.connected()
        #expect(m.connectionLost() == .connect)
        var delays: [Duration] = []
        for _ in 0..<8 {
            guard case .closeAndWait(let delay) = m.connectionLost() else { Issue.record("expected a wait"); return }
            delays.append(delay)
            #expect(m.backoffElapsed() == .connect)
        }
        #expect(delays == [1, 2, 4, 8, 16, 30, 30, 30].map { Duration.seconds($0) })
        #expect(m.connected() == .listenAllAndResync)
    }

    /// The heartbeat runs only while listening; a missing channel re-LISTENs; silence reconnects.
    @Test func heartbeatOutcomes() {
        var m = machine()
        #expect(m.heartbeatDue() == .none)
        _ = m.start(); _ = m.connected()
        #expect(m.heartbeatDue() == .sendHeartbeat)
        #expect(m.heartbeatAnswered(serverChannels: ["a", "b"], expected: ["a", "b"]) == .none)
        #expect(m.heartbeatAnswered(serverChannels: ["a"], expected: ["a", "b"]) == .relistenAndResync)
        #expect(m.heartbeatTimedOut() == .connect)
    }

    /// Shutdown closes once from any state, and nothing happens after it.
    @Test func shutdownIsFinal() {
        var m = machine()
        _ = m.start()
        #expect(m.shutdown() == .close)
        #expect(m.shutdown() == .none)
        #expect(m.connected() == .none)
        #expect(m.connectionLost() == .none)
        #expect(m.backoffElapsed() == .none)
    }
}

/// Reconnect delays.
@Suite struct BackoffTests {
    /// Jitter keeps each delay between half and all of the capped exponential base.
    @Test func jitterStaysWithinHalfToFullBase() {
        let backoff = PGBackoff.standard
        #expect(backoff.delay(attempt: 0, random: 0) == .milliseconds(500))
        #expect(backoff.delay(attempt: 0, random: 1) == .seconds(1))
        #expect(backoff.delay(attempt: 3, random: 0.5) == .seconds(6))
        #expect(backoff.delay(attempt: 60, random: 1) == .seconds(30))
        #expect(backoff.delay(attempt: 60, random: 0) == .seconds(15))
    }
}

/// The buffer between the listener's thread and a consumer.
@Suite struct NotificationSinkTests {
    /// A consumer that falls behind gets one resync instead of an unbounded buffer.
    @Test func overflowCollapsesIntoOneResync() async {
        let sink = PGNotificationSink(capacity: 4)
        let notification = { (n: Int) in PGListenerEvent.notification(PGNotification(channel: "c", payload: "\(n)", pid: 1)) }
        for n in 0..<10 { sink.yield(notification(n)) }
        #expect(sink.overflows >= 1)
        var iterator = PGNotificationSequence(sink: sink).makeAsyncIterator()
        #expect(await iterator.next() == .resync)
        var rest: [PGListenerEvent] = []
        sink.finish()
        while let event = await iterator.next() { rest.append(event) }
        #expect(rest.count < 4)
        #expect(rest.last == notification(9))
    }

    /// A batch is every event buffered when the consumer looks, in order, up to its maximum
    /// (at least the first, which it waits for); the rest come with the next batch, and a
    /// finished sequence ends the batches too.
    @Test func batchesTakeWhatIsBufferedInOrder() async {
        let sink = PGNotificationSink()
        let notification = { (n: Int) in PGListenerEvent.notification(PGNotification(channel: "c", payload: "\(n)", pid: 1)) }
        for n in 0..<5 { sink.yield(notification(n)) }
        var iterator = PGNotificationSequence(sink: sink).makeAsyncIterator()
        #expect(await iterator.nextBatch(maximum: 3) == [notification(0), notification(1), notification(2)])
        #expect(await iterator.nextBatch(maximum: 3) == [notification(3), notification(4)])
        let waiting = Task { [iterator] in
            var iterator = iterator
            return await iterator.nextBatch(maximum: 3)
        }
        try? await Task.sleep(for: .milliseconds(20))  // (the batch waits for its first event)
        sink.yield(notification(5))
        #expect(await waiting.value == [notification(5)])
        sink.finish()
        #expect(await iterator.nextBatch(maximum: 3) == nil)
    }

    /// Several pending resyncs collapse into one; finish ends the sequence.
    @Test func resyncsCollapseAndFinishEnds() async {
        let sink = PGNotificationSink()
        sink.yield(.resync); sink.yield(.resync)
        sink.finish()
        var iterator = PGNotificationSequence(sink: sink).makeAsyncIterator()
        #expect(await iterator.next() == .resync)
        #expect(await iterator.next() == nil)
    }
}
