import Lifecycle
import RelayCore
import Synchronization

/// Calls of one kind that come while `maximumInFlight` of them are in flight wait, and go
/// to Postgres together, as one batched call, as soon as one returns: a batch forms only
/// under load, so a lone call waits for nothing and costs what it did, and under load one
/// round trip, commit and executor start serve several calls.
///
/// Bounded: a batch takes at most `maximumBatch` waiting calls. What may wait is bounded by
/// the callers: every call is a locate or an answer admitted under its own caps.
final class CallCoalescer<Input: Sendable, Output: Sendable>: Sendable {
    /// One call alone.
    typealias Single = @Sendable (Input) async throws -> Output
    /// One call for several: a result per input, in their order. A throw fails them all.
    typealias Batch = @Sendable ([Input]) async throws -> [Result<Output, any Error>]

    private struct Waiting: Sendable {
        let input: Input
        let continuation: CheckedContinuation<Output, any Error>
    }

    /// The decisions are `CallBatcher`'s (a window of zero: what arrives while every slot
    /// is taken goes together when one frees), the batching that hellos, disconnects,
    /// delivered marks and session checks use too; the coalescer only makes the calls.
    private struct State {
        var batcher: CallBatcher<Waiting>
        var batches = 0
    }

    private let state: Mutex<State>
    private let single: Single
    /// The batches' tasks, counted until they end (`RelayDatabase.batches`: the pool's
    /// shutdown waits for them).
    private let tasks: OwnedTasks
    /// The batched call (tests make it directly).
    let batch: Batch
    /// Calls (single or batched) in flight at once.
    let maximumInFlight: Int
    /// Calls one batch takes.
    let maximumBatch: Int

    /// A coalescer making at most `maximumInFlight` calls at once, of at most `maximumBatch`
    /// inputs each (both at least 1; a batch has at least 2), each batch in a task of `tasks`.
    init(maximumInFlight: Int, maximumBatch: Int, tasks: OwnedTasks = OwnedTasks(), single: @escaping Single,
         batch: @escaping Batch) {
        self.tasks = tasks
        self.maximumInFlight = max(1, maximumInFlight)
        self.maximumBatch = max(2, maximumBatch)
        self.single = single
        self.batch = batch
        state = Mutex(State(batcher: CallBatcher(window: .zero, maximumBatch: max(2, maximumBatch),
                                                 maximumInFlight: max(1, maximumInFlight))))
    }

    /// Makes the call: at once and alone (in the caller's task) when a slot is free and no
    /// call waits, else in the next batch.
    func call(_ input: Input) async throws -> Output {
        if state.withLock({ $0.batcher.takeSlotIfFree() }) {
            defer { start(state.withLock { $0.batcher.sent() }) }
            return try await single(input)
        }
        return try await withCheckedThrowingContinuation { continuation in
            // A slot may have come free since the look above: then this call goes at once.
            start(state.withLock { $0.batcher.add(Waiting(input: input, continuation: continuation)) })
        }
    }

    /// Calls waiting now (for tests and metrics).
    var waitingCount: Int { state.withLock { $0.batcher.waiting.count } }

    /// Batched calls made so far (for tests and metrics).
    var batchesMade: Int { state.withLock { $0.batches } }

    /// Starts the calls the batcher decided on (a window of zero arms no timer).
    private func start(_ actions: [CallBatcher<Waiting>.Action]) {
        for case .send(let calls) in actions {
            if calls.count > 1 { state.withLock { $0.batches += 1 } }
            // Owners: the callers in `calls`, each awaiting its continuation, which the task
            // resumes before it ends (the next batch starts from its end); and `tasks`, which
            // counts it until it ended. It must not be the task of one of the callers: a
            // caller that hangs up would cancel the others' call. Never refused: `tasks` is
            // only waited for, never finished, since callers wait for every batch.
            tasks.spawn { await Logger.untraced { await self.run(calls) } }
        }
    }

    /// Makes one call for `calls` (alone when there is one) and answers each.
    private func run(_ calls: [Waiting]) async {
        defer { start(state.withLock { $0.batcher.sent() }) }
        if calls.count == 1 {
            do { calls[0].continuation.resume(returning: try await single(calls[0].input)) } catch {
                calls[0].continuation.resume(throwing: error)
            }
            return
        }
        do {
            let results = try await batch(calls.map(\.input))
            guard results.count == calls.count else { throw CoalescerError.resultCount }
            for (call, result) in zip(calls, results) { call.continuation.resume(with: result) }
        } catch {
            for call in calls { call.continuation.resume(throwing: error) }
        }
    }

    /// A batch that answered with the wrong number of results.
    enum CoalescerError: Error {
        case resultCount
    }
}
