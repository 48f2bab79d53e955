import Lifecycle
import Synchronization
import Testing

/// Counted tasks: `idle()` waits for every task started, those started meanwhile too, and
/// after `finish()` none starts.
@Suite struct OwnedTasksTests {
    @Test func idleWaitsForEveryTaskAndFinishRefusesNewOnes() async throws {
        let tasks = OwnedTasks()
        await tasks.idle()  // none: at once
        let (release, input) = AsyncStream<Void>.makeStream()
        let done = Atomic<Int>(0)
        for _ in 0..<3 {
            tasks.spawn {
                for await _ in release {}
                done.add(1, ordering: .relaxed)
            }
        }
        #expect(tasks.running == 3)
        let idle = Task { await tasks.idle() }
        input.finish()
        await idle.value
        #expect(done.load(ordering: .relaxed) == 3 && tasks.running == 0)
        await tasks.finish()
        #expect(tasks.spawn { done.add(1, ordering: .relaxed) } == nil, "nothing starts after finish()")
        #expect(done.load(ordering: .relaxed) == 3)
    }

    /// A task that starts another before it ends keeps `idle()` waiting for both.
    @Test func idleWaitsForTasksStartedMeanwhile() async throws {
        let tasks = OwnedTasks()
        let order = Mutex<[String]>([])
        let (release, input) = AsyncStream<Void>.makeStream()
        tasks.spawn {
            for await _ in release {}
            tasks.spawn {
                await Task.yield()
                order.withLock { $0.append("second") }
            }
            order.withLock { $0.append("first") }
        }
        input.finish()
        await tasks.idle()
        #expect(order.withLock { $0 }.sorted() == ["first", "second"])
    }
}
