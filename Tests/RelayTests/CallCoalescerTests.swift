import Foundation
@testable import Relay
import Synchronization
import Testing
import TestSupport

/// Calls that come while others are in flight go together as one batch when a slot frees;
/// a lone call goes alone at once; each caller gets its own result.
@Suite struct CallCoalescerTests {
    /// A gate the single call waits at, so that calls pile up behind it.
    final class Gate: Sendable {
        private let opened = Mutex<(open: Bool, waiters: [CheckedContinuation<Void, Never>])>((false, []))
        func wait() async {
            await withCheckedContinuation { continuation in
                let now = opened.withLock { state -> Bool in
                    if state.open { return true }
                    state.waiters.append(continuation)
                    return false
                }
                if now { continuation.resume() }
            }
        }
        func open() {
            let waiters = opened.withLock { state in
                state.open = true
                defer { state.waiters = [] }
                return state.waiters
            }
            for waiter in waiters { waiter.resume() }
        }
    }

    struct Failure: Error, Equatable { let input: Int }

    /// Records the calls made: singles and batches, by their inputs.
    final class Calls: Sendable {
        let singles = Mutex<[Int]>([])
        let batches = Mutex<[[Int]]>([])
    }

    func coalescer(inFlight: Int = 1, batch: Int = 32, gate: Gate, calls: Calls,
                   batchThrows: Bool = false) -> CallCoalescer<Int, Int> {
        CallCoalescer(maximumInFlight: inFlight, maximumBatch: batch, single: { input in
            calls.singles.withLock { $0.append(input) }
            if input == 0 { await gate.wait() }
            if input < 0 { throw Failure(input: input) }
            return input * 10
        }, batch: { inputs in
            calls.batches.withLock { $0.append(inputs) }
            if batchThrows { throw Failure(input: 99) }
            return inputs.map { $0 < 0 ? .failure(Failure(input: $0)) : .success($0 * 10) }
        })
    }

    /// Starts calls for `inputs` behind a first call (input 0) held at the gate, waits until
    /// they all wait, opens the gate, and returns each input's result.
    func pileUp(_ coalescer: CallCoalescer<Int, Int>, _ inputs: [Int], gate: Gate, calls: Calls) async -> [Int: Result<Int, Failure>] {
        await withTaskGroup(of: (Int, Result<Int, Failure>).self) { group in
            group.addTask {
                do { return (0, .success(try await coalescer.call(0))) } catch { return (0, .failure(error as! Failure)) }
            }
            try? await eventually("the first call is at the gate") { calls.singles.withLock { $0.contains(0) } }
            for input in inputs {
                group.addTask {
                    do { return (input, .success(try await coalescer.call(input))) } catch { return (input, .failure(error as! Failure)) }
                }
            }
            try? await eventually("every later call waits") { coalescer.waitingCount >= inputs.count }
            gate.open()
            var results: [Int: Result<Int, Failure>] = [:]
            for await (input, result) in group { results[input] = result }
            return results
        }
    }

    @Test func aLoneCallGoesAloneAtOnce() async throws {
        let calls = Calls(), gate = Gate()
        let coalescer = coalescer(gate: gate, calls: calls)
        #expect(try await coalescer.call(4) == 40)
        #expect(try await coalescer.call(5) == 50)
        #expect(calls.singles.withLock { $0 } == [4, 5])
        #expect(calls.batches.withLock { $0 }.isEmpty)
        await #expect(throws: Failure(input: -1)) { try await coalescer.call(-1) }
    }

    @Test func callsWaitingBehindOneInFlightGoAsOneBatch() async throws {
        let calls = Calls(), gate = Gate()
        let coalescer = coalescer(gate: gate, calls: calls)
        let results = await pileUp(coalescer, Array(1...6) + [-7], gate: gate, calls: calls)
        #expect(calls.singles.withLock { $0 } == [0], "only the first went alone")
        let batches = calls.batches.withLock { $0 }
        #expect(batches.count == 1)
        #expect(Set(batches.first ?? []) == Set(Array(1...6) + [-7]))
        for input in 1...6 { #expect(results[input] == .success(input * 10), "each caller gets its own result") }
        #expect(results[-7] == .failure(Failure(input: -7)), "a refused element fails its caller alone")
        #expect(results[0] == .success(0))
        #expect(coalescer.batchesMade == 1)
        #expect(try await coalescer.call(8) == 80, "and a lone call goes alone again")
        #expect(calls.singles.withLock { $0 } == [0, 8])
    }

    /// Hostile input round 3: the batch of the calls waiting behind a first call
    /// starts when that call returns, from its task — and must not carry its trace context,
    /// or the other callers' log lines would name the first caller's (an agent's) trace id.
    @Test func aBatchRunsWithoutTheTraceOfTheCallThatFreedItsSlot() async throws {
        let gate = Gate(), seen = Mutex<[String]>([]), started = Mutex(false)
        let coalescer = CallCoalescer<Int, Int>(maximumInFlight: 1, maximumBatch: 8, single: { input in
            started.withLock { $0 = true }
            await gate.wait()
            seen.withLock { $0.append("single: \(Logger.traceparent ?? "none")") }
            return input
        }, batch: { inputs in
            seen.withLock { $0.append("batch: \(Logger.traceparent ?? "none")") }
            return inputs.map { .success($0) }
        })
        await withTaskGroup(of: Void.self) { group in
            group.addTask { _ = try? await Logger.$traceparent.withValue("attacker") { try await coalescer.call(0) } }
            try? await eventually("the first call started") { started.withLock { $0 } }
            for input in 1...2 { group.addTask { _ = try? await coalescer.call(input) } }
            try? await eventually("both later calls wait") { coalescer.waitingCount >= 2 }
            gate.open()
        }
        #expect(seen.withLock { $0 } == ["single: attacker", "batch: none"])
    }

    @Test func aBatchTakesAtMostItsLimit() async throws {
        let calls = Calls(), gate = Gate()
        let coalescer = coalescer(batch: 3, gate: gate, calls: calls)
        let results = await pileUp(coalescer, Array(1...7), gate: gate, calls: calls)
        #expect(calls.batches.withLock { $0 }.map(\.count) == [3, 3])
        #expect(calls.singles.withLock { $0 }.count == 2, "the first call and the one left over go alone")
        for input in 1...7 { #expect(results[input] == .success(input * 10)) }
    }

    @Test func aBatchThatFailsFailsEachOfItsCallers() async throws {
        let calls = Calls(), gate = Gate()
        let coalescer = coalescer(gate: gate, calls: calls, batchThrows: true)
        let results = await pileUp(coalescer, [1, 2, 3], gate: gate, calls: calls)
        for input in 1...3 { #expect(results[input] == .failure(Failure(input: 99))) }
        #expect(results[0] == .success(0), "the call in flight was not in it")
        #expect(try await coalescer.call(4) == 40, "the slot was given back")
    }
}
