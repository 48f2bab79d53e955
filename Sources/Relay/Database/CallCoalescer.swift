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

    private struct State {
        var inFlight = 0
        var waiting: [Waiting] = []
        var batches = 0
    }

    private let state = Mutex(State())
    private let single: Single
    /// The batched call (tests make it directly).
    let batch: Batch
    /// Calls (single or batched) in flight at once.
    let maximumInFlight: Int
    /// Calls one batch takes.
    let maximumBatch: Int

    /// A coalescer making at most `maximumInFlight` calls at once, of at most `maximumBatch`
    /// inputs each (both at least 1; a batch has at least 2).
    init(maximumInFlight: Int, maximumBatch: Int, single: @escaping Single, batch: @escaping Batch) {
        self.maximumInFlight = max(1, maximumInFlight)
        self.maximumBatch = max(2, maximumBatch)
        self.single = single
        self.batch = batch
    }

    /// Makes the call: at once and alone when a slot is free, else in the next batch.
    func call(_ input: Input) async throws -> Output {
        if takeSlot() {
            defer { callEnded() }
            return try await single(input)
        }
        return try await withCheckedThrowingContinuation { continuation in
            let waiting = Waiting(input: input, continuation: continuation)
            // A slot may have come free since the look above: then this call goes alone.
            let alone = state.withLock { state -> Bool in
                if state.inFlight < maximumInFlight {
                    state.inFlight += 1
                    return true
                }
                state.waiting.append(waiting)
                return false
            }
            // Owner: the callers in the batch, each awaiting its continuation, which the
            // task resumes before it ends (the next batch starts from its end).
            if alone { Task { await Logger.untraced { await self.run([waiting]) } } }
        }
    }

    /// Calls waiting now (for tests and metrics).
    var waitingCount: Int { state.withLock { $0.waiting.count } }

    /// Batched calls made so far (for tests and metrics).
    var batchesMade: Int { state.withLock { $0.batches } }

    private func takeSlot() -> Bool {
        state.withLock { state in
            guard state.inFlight < maximumInFlight else { return false }
            state.inFlight += 1
            return true
        }
    }

    /// A call returned: its slot goes to the calls waiting (as one batch), or is freed.
    private func callEnded() {
        let next = state.withLock { state -> [Waiting]? in
            guard !state.waiting.isEmpty else {
                state.inFlight -= 1
                return nil
            }
            let taken = Array(state.waiting.prefix(maximumBatch))
            state.waiting.removeFirst(taken.count)
            if taken.count > 1 { state.batches += 1 }
            if state.waiting.isEmpty { state.waiting = [] }  // no buffer kept while idle
            return taken
        }
        // Owner: the waiting callers of `next`, as for the first call.
        if let next { Task { await Logger.untraced { await self.run(next) } } }
    }

    /// Makes one call for `calls` (alone when there is one) and answers each.
    private func run(_ calls: [Waiting]) async {
        defer { callEnded() }
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
