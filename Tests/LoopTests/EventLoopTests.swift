import Loop
import Synchronization
import Testing

/// The shared loop: jobs from any thread, tasks that prefer it, and its timers (in order,
/// cancellable from any thread, never early, and not kept once cancelled).
@Suite struct EventLoopTests {
    @Test func timersFireInOrderAndCancelledOnesNever() async throws {
        let loop = try EventLoop.start(name: "loop-tests")
        defer { loop.stop() }
        let fired = Mutex<[Int]>([])
        let started = ContinuousClock.now
        let late = Mutex<[Duration]>([])
        var handles: [LoopTimer] = []
        for (index, milliseconds) in [60, 20, 40, 10, 30].enumerated() {
            handles.append(loop.schedule(after: .milliseconds(milliseconds)) {
                fired.withLock { $0.append(index) }
                late.withLock { $0.append(ContinuousClock.now - started - .milliseconds(milliseconds)) }
            })
        }
        handles[2].cancel()  // 40 ms
        try await Task.sleep(for: .milliseconds(300))
        #expect(fired.withLock { $0 } == [3, 1, 4, 0])
        #expect(late.withLock { $0 }.allSatisfy { $0 >= .zero })
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
