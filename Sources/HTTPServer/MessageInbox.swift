import Synchronization

/// Messages from the loop thread to the handler's task, and the close code.
final class MessageInbox: Sendable {
    private struct State {
        var messages: [WebSocketMessage] = []
        var waiter: CheckedContinuation<WebSocketMessage?, Never>?
        var closeCode: UInt16?
        var closeReason = ""
        var finished = false
    }

    private let state = Mutex(State())

    /// Delivers a message (loop thread).
    func deliver(_ message: WebSocketMessage) {
        let waiter = state.withLock { state -> CheckedContinuation<WebSocketMessage?, Never>? in
            guard !state.finished else { return nil }
            if let waiter = state.waiter {
                state.waiter = nil
                return waiter
            }
            state.messages.append(message)
            return nil
        }
        waiter?.resume(returning: message)
    }

    /// Ends the sequence with the close code and reason (the first one given wins).
    func finish(code: UInt16, reason: String = "") {
        let waiter = state.withLock { state -> CheckedContinuation<WebSocketMessage?, Never>? in
            if state.closeCode == nil {
                state.closeCode = code
                state.closeReason = reason
            }
            state.finished = true
            defer { state.waiter = nil }
            return state.waiter
        }
        waiter?.resume(returning: nil)
    }

    var closeCode: UInt16? { state.withLock { $0.closeCode } }
    var closeReason: String { state.withLock { $0.closeReason } }

    func next() async -> WebSocketMessage? {
        await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<WebSocketMessage?, Never>) in
                let immediate: WebSocketMessage?? = state.withLock { state in
                    if !state.messages.isEmpty { return .some(state.messages.removeFirst()) }
                    if state.finished || Task.isCancelled { return .some(nil) }
                    state.waiter = continuation
                    return .none
                }
                if let immediate { continuation.resume(returning: immediate) }
            }
        } onCancel: {
            let waiter = state.withLock { state -> CheckedContinuation<WebSocketMessage?, Never>? in
                defer { state.waiter = nil }
                return state.waiter
            }
            waiter?.resume(returning: nil)
        }
    }
}
