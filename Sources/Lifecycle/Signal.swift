import Synchronization

/// A one-shot event: `wait()` returns once `fire()` has been called, before or after.
final class Signal: Sendable {
    private let state = Mutex<(fired: Bool, waiters: [CheckedContinuation<Void, Never>])>((false, []))

    /// Whether `fire()` has been called.
    var hasFired: Bool { state.withLock { $0.fired } }

    /// Fires the event (again: nothing); returns whether this call fired it.
    @discardableResult
    func fire() -> Bool {
        let (fired, waiters) = state.withLock { state -> (Bool, [CheckedContinuation<Void, Never>]) in
            guard !state.fired else { return (false, []) }
            state.fired = true
            defer { state.waiters = [] }
            return (true, state.waiters)
        }
        waiters.forEach { $0.resume() }
        return fired
    }

    /// Returns once the event has fired.
    func wait() async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let fired = state.withLock { state -> Bool in
                if !state.fired { state.waiters.append(continuation) }
                return state.fired
            }
            if fired { continuation.resume() }
        }
    }
}
