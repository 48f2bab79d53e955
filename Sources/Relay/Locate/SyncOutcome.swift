import Foundation
import Synchronization

/// The outcome of a synchronous locate (`POST /v1/locate` without `Prefer: respond-async`)
/// for the calls that joined it: its caller may hang up (not a refusal: the request stays
/// open for the person until its deadline), and the same credential's next ask for the
/// same person waits for this outcome instead of opening another prompt. A synchronous
/// request has no request_id, so its outcome is handed over in memory, on the instance
/// whose call opened it, and kept `undeliveredTTL` for an ask that comes after it settled
/// while nobody was there to receive it.
final class SyncOutcome: Sendable {
    /// How long an outcome nobody received is kept for the next ask.
    static let undeliveredTTL: TimeInterval = 60

    private struct State {
        var result: LocateService.Result?
        var settledAt: Date?
        var waiters: [UUID: CheckedContinuation<LocateService.Result?, Never>] = [:]
    }

    private let state = Mutex(State())

    /// Hands `result`, settled at `now`, to every call waiting for it; true when one received it.
    @discardableResult
    func publish(_ result: LocateService.Result, now: Date) -> Bool {
        let waiters = state.withLock { state in
            state.result = result
            state.settledAt = now
            defer { state.waiters.removeAll() }
            return Array(state.waiters.values)
        }
        for waiter in waiters { waiter.resume(returning: result) }
        return !waiters.isEmpty
    }

    /// The request could not be asked (the database failed): every waiting call gets nil.
    func fail(now: Date) {
        let waiters = state.withLock { state in
            state.settledAt = now.addingTimeInterval(-Self.undeliveredTTL)  // never joinable again
            defer { state.waiters.removeAll() }
            return Array(state.waiters.values)
        }
        for waiter in waiters { waiter.resume(returning: nil) }
    }

    /// Whether an outcome is (still) there to join at `now`: open, or settled and kept.
    func joinable(now: Date) -> Bool {
        state.withLock { state in state.settledAt.map { now.timeIntervalSince($0) < Self.undeliveredTTL } ?? true }
    }

    /// Waits for the outcome (at once when it is there); nil when the waiting task is
    /// cancelled first (its caller hung up too) or the request could not be asked.
    func outcome() async -> LocateService.Result? {
        let key = UUID()
        return await withTaskCancellationHandler {
            await withCheckedContinuation { continuation in
                let ready: LocateService.Result?? = state.withLock { state in
                    if let result = state.result { return .some(result) }
                    if Task.isCancelled { return .some(nil) }
                    state.waiters[key] = continuation
                    return nil
                }
                if let ready { continuation.resume(returning: ready) }
            }
        } onCancel: {
            let waiter = state.withLock { $0.waiters.removeValue(forKey: key) }
            waiter?.resume(returning: nil)
        }
    }
}
