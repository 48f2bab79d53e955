import Loop
import Synchronization
import Testing

/// The shared loop: jobs from any thread, tasks that prefer it, and its timers (in order,
/// cancellable from any thread, never early, and not kept once cancelled).
@Suite struct EventLoopTests {
    /// On a manual clock: each timer fires once time reaches its deadline, not a
    /// millisecond before, in deadline order; a cancelled one never fires.
    @Test func timersFireInOrderAndCancelledOnesNever() async throws {
        let loop = try EventLoop.start(name: "loop-tests", clock: .manual)
        defer { loop.stop() }
        let fired = Mutex<[Int]>([])
        var handles: [LoopTimer] = []
        for (index, milliseconds) in [60, 20, 40, 10, 30].enumerated() {
            handles.append(loop.schedule(after: .milliseconds(milliseconds)) { fired.withLock { $0.append(index) } })
        }
        handles[2].cancel()  // 40 ms
        await loop.advance(by: .milliseconds(9))
        #expect(fired.withLock { $0 } == [], "nothing is due before 10 ms")
        await loop.advance(by: .milliseconds(1))
        #expect(fired.withLock { $0 } == [3])
        await loop.advance(by: .milliseconds(10))
        #expect(fired.withLock { $0 } == [3, 1])
        await loop.advance(by: .milliseconds(9))
        #expect(fired.withLock { $0 } == [3, 1], "the 30 ms timer waits for its last millisecond")
        await loop.advance(by: .milliseconds(1))
        #expect(fired.withLock { $0 } == [3, 1, 4])
        await loop.advance(by: .seconds(60))
        #expect(fired.withLock { $0 } == [3, 1, 4, 0])
    }

    /// On the system clock a timer never fires before its delay has passed.
    @Test func timersOnTheSystemClockNeverFireEarly() async throws {
        let loop = try EventLoop.start(name: "loop-tests")
        defer { loop.stop() }
        let started = ContinuousClock.now
        let late = await withCheckedContinuation { (done: CheckedContinuation<Duration, Never>) in
            loop.schedule(after: .milliseconds(30)) { done.resume(returning: ContinuousClock.now - started - .milliseconds(30)) }
        }
        #expect(late >= .zero)
    }

    /// A job that a due timer queues runs before `advance(by:)` returns, and a timer armed
    /// by a timer at a deadline already passed fires in the same advance.
    @Test func advanceRunsWhatDueTimersStart() async throws {
        let loop = try EventLoop.start(name: "loop-tests", clock: .manual)
        defer { loop.stop() }
        let steps = Mutex<[String]>([])
        loop.schedule(after: .seconds(5)) {
            steps.withLock { $0.append("timer") }
            loop.execute { steps.withLock { $0.append("job") } }
            loop.schedule(after: .zero) { steps.withLock { $0.append("rearmed") } }
        }
        await loop.advance(by: .seconds(5))
        #expect(steps.withLock { $0 } == ["timer", "job", "rearmed"])
    }

    @Test func cancelledTimersDoNotPileUp() async throws {
        let loop = try EventLoop.start(name: "loop-tests")
        defer { loop.stop() }
        let pending = try await Task(executorPreference: loop) { () -> Int in
            for _ in 0..<10_000 { loop.schedule(after: .seconds(60)) {}.cancel() }
            return loop.pendingTimers
        }.value
        #expect(pending <= 128)
    }

    /// With nothing armed the loop sleeps (epoll without a timeout); a job from another
    /// thread still wakes it, or this never returns.
    @Test func anIdleLoopIsWokenByJobs() async throws {
        let loop = try EventLoop.start(name: "loop-tests")
        defer { loop.stop() }
        // Real time: the loop must have gone to sleep in epoll_wait before the job comes.
        try await Task.sleep(for: .milliseconds(400))
        let ran = await withCheckedContinuation { (done: CheckedContinuation<Bool, Never>) in
            loop.execute { done.resume(returning: loop.inLoop) }
        }
        #expect(ran)
    }

    @Test func tasksPreferringTheLoopRunOnIt() async throws {
        let loop = try EventLoop.start(name: "loop-tests")
        defer { loop.stop() }
        let onLoop = await Task(executorPreference: loop) { () -> Bool in
            var every = loop.inLoop
            for _ in 0..<10 {
                await Task.yield()
                every = every && loop.inLoop
            }
            return every
        }.value
        #expect(onLoop)
        let fromOutside = await withCheckedContinuation { continuation in
            loop.execute { continuation.resume(returning: loop.inLoop) }
        }
        #expect(fromOutside)
    }

    @Test func stopEndsTheLoop() async throws {
        let loop = try EventLoop.start(name: "loop-tests")
        loop.stop()
        await loop.finished()
    }
}
