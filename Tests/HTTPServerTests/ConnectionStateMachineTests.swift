@testable import HTTPServer
import Testing

/// The connection's decisions without a socket: each test feeds events with instants of
/// its own (the machine has no clock) and checks the actions.
@Suite struct ConnectionStateMachineTests {
    static let timeouts = ConnectionStateMachine.Timeouts(headerRead: .seconds(10), idle: .seconds(75), linger: .seconds(2),
                                                          maxLingerBytes: 100)
    let start = ContinuousClock.now

    func machine() -> ConnectionStateMachine { ConnectionStateMachine(timeouts: Self.timeouts, now: start) }

    /// A silent connection has only its idle deadline; its first bytes start the head's
    /// deadline, past which it is answered 408; a parsed request ends it; after the
    /// response, idleness is measured from the response.
    @Test func theHeadAndIdleDeadlines() {
        var machine = machine()
        #expect(machine.nextDeadline(idle: true) == start + .seconds(75))
        machine.received(now: start + .seconds(1))
        #expect(machine.nextDeadline(idle: false) == start + .seconds(11))
        #expect(machine.deadlinePassed(now: start + .seconds(11), idle: false).isEmpty, "strict: not on the deadline itself")
        #expect(machine.deadlinePassed(now: start + .seconds(12), idle: false) == [.respondTimeout])
        machine.parsed(midRequest: false, now: start + .seconds(2))
        machine.handlerStarted()
        #expect(machine.nextDeadline(idle: true) == nil, "a running handler has no deadline")
        #expect(machine.deadlinePassed(now: start + .seconds(500), idle: true).isEmpty)
        machine.responding(status: 200, keepAlive: true, now: start + .seconds(3))
        #expect(machine.responded(pending: 0) == [.dispatchNext])
        #expect(machine.nextDeadline(idle: true) == start + .seconds(78))
        #expect(machine.deadlinePassed(now: start + .seconds(79), idle: true) == [.close])
        #expect(machine.deadlinePassed(now: start + .seconds(79), idle: false).isEmpty, "a waiting request is not idle")
    }

    /// An error response without keep-alive lingers once written: the write side is shut,
    /// input is read and discarded up to the byte bound or the linger's end, then it closes.
    @Test func anErrorResponseLingersThenCloses() {
        var machine = machine()
        #expect(machine.parseFailed() == [.updateInterest])
        machine.responding(status: 413, keepAlive: false, now: start)
        #expect(!machine.canDispatch && machine.responded(pending: 0).isEmpty, "nothing more is answered")
        #expect(machine.flushed(now: start) == [.shutdownWrite, .updateInterest])
        #expect(machine.wantsReads && machine.nextDeadline(idle: true) == start + .seconds(2))
        #expect(machine.discarded(60).isEmpty)
        #expect(machine.discarded(60) == [.close], "past the byte bound")
        var timedOut = self.machine()
        timedOut.responding(status: 400, keepAlive: false, now: start)
        _ = timedOut.flushed(now: start)
        #expect(timedOut.deadlinePassed(now: start + .seconds(2), idle: true) == [.close])
        var ended = self.machine()
        ended.responding(status: 431, keepAlive: false, now: start)
        _ = ended.flushed(now: start)
        #expect(ended.discarded(0) == [.close], "end of input")
    }

    /// A successful response without keep-alive, and a streamed one even with an error
    /// status, close as soon as they are written.
    @Test func otherEndingResponsesCloseWhenWritten() {
        var machine = machine()
        machine.responding(status: 200, keepAlive: false, now: start)
        #expect(machine.flushed(now: start) == [.close])
        var streamed = self.machine()
        streamed.handlerStarted()
        streamed.responding(status: 500, keepAlive: false, streamed: true, now: start)
        #expect(streamed.flushed(now: start) == [.close])
        var kept = self.machine()
        kept.responding(status: 404, keepAlive: true, now: start)
        #expect(kept.flushed(now: start).isEmpty, "a kept-alive connection stays")
    }

    /// Reading pauses once; it resumes after a response only when few requests wait, never
    /// while a handler runs or the connection is ending.
    @Test func pausingAndResuming() {
        var machine = machine()
        #expect(machine.pause() == [.updateInterest] && machine.pause().isEmpty)
        machine.handlerStarted()
        #expect(machine.resume(pending: 0).isEmpty, "a handler runs")
        machine.responding(status: 200, keepAlive: true, now: start)
        #expect(machine.responded(pending: ConnectionStateMachine.maximumPending + 1) == [.dispatchNext])
        #expect(machine.readingPaused, "too many waiting")
        #expect(machine.responded(pending: 1) == [.updateInterest, .parseBuffered, .dispatchNext])
        #expect(!machine.wantsReads == machine.readingPaused)
    }

    /// A WebSocket keeps its own deadlines; its close ends the connection once written.
    @Test func aWebSocket() {
        var machine = machine()
        _ = machine.pause()
        machine.handlerStarted()
        #expect(machine.upgraded() == [.updateInterest])
        #expect(machine.wantsReads && machine.isBusy && machine.nextDeadline(idle: true) == nil)
        machine.closeWhenFlushed()
        #expect(machine.flushed(now: start) == [.close])
        machine.closed()
        #expect(machine.isClosed && !machine.wantsReads && !machine.isBusy)
    }

    /// Graceful shutdown: an idle connection ends once written; a busy one answers first
    /// (its response then goes without keep-alive, which the connection decides from `draining`).
    @Test func drainingEndsIdleConnectionsAndLetsBusyOnesFinish() {
        var idle = machine()
        idle.drain()
        #expect(idle.draining && idle.flushed(now: start) == [.close])
        var busy = machine()
        busy.handlerStarted()
        busy.drain()
        #expect(busy.draining && busy.flushed(now: start).isEmpty && busy.isBusy)
    }
}
