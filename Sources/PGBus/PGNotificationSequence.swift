import Synchronization

/// The events of one `PGListener.listen(on:_:)` scope, as an async sequence.
///
/// Buffered up to a capacity; when a slow consumer lets the buffer fill, the buffered
/// notifications are dropped and replaced by one `.resync`, since the consumer must re-read
/// its tables anyway. One task iterates it; it ends when the scope ends or the listener
/// shuts down.
public struct PGNotificationSequence: AsyncSequence, Sendable {
    public typealias Element = PGListenerEvent

    let sink: PGNotificationSink

    public func makeAsyncIterator() -> Iterator { Iterator(sink: sink) }

    /// Iterates the events; `next()` returns nil when the scope has ended.
    public struct Iterator: AsyncIteratorProtocol, Sendable {
        let sink: PGNotificationSink
        public mutating func next() async -> PGListenerEvent? { await sink.next() }

        /// Every event buffered now, up to `maximum` (at least one: it waits for the first);
        /// nil once the sequence ended. A consumer that hands events on takes them so, one
        /// hop for a burst rather than one per event.
        public mutating func nextBatch(maximum: Int) async -> [PGListenerEvent]? {
            guard let first = await sink.next() else { return nil }
            var batch = [first]
            sink.take(upTo: maximum - 1, into: &batch)
            return batch
        }
    }
}

/// The buffer between the listener's thread and one consumer.
final class PGNotificationSink: Sendable {
    /// Default number of events buffered before they collapse into one `.resync`.
    static let defaultCapacity = 4096

    private struct State {
        var buffer: [PGListenerEvent] = []
        var head = 0
        var waiter: CheckedContinuation<PGListenerEvent?, Never>?
        var finished = false
        var overflows = 0
        var count: Int { buffer.count - head }
    }

    private let state = Mutex(State())
    private let capacity: Int

    init(capacity: Int = PGNotificationSink.defaultCapacity) {
        self.capacity = max(2, capacity)
    }

    /// Adds an event (from the listener's thread); collapses the buffer on overflow.
    func yield(_ event: PGListenerEvent) {
        let waiter: CheckedContinuation<PGListenerEvent?, Never>? = state.withLock { state in
            guard !state.finished else { return nil }
            if let waiter = state.waiter {
                state.waiter = nil
                return waiter
            }
            if state.count >= capacity {
                state.buffer = [.resync]
                state.head = 0
                state.overflows += 1
            }
            if event == .resync, state.buffer[state.head...].contains(.resync) {
                return nil  // one pending resync covers any number of them
            }
            state.buffer.append(event)
            return nil
        }
        waiter?.resume(returning: event)
    }

    /// Ends the sequence; a waiting `next()` returns nil.
    func finish() {
        let waiter = state.withLock { state -> CheckedContinuation<PGListenerEvent?, Never>? in
            state.finished = true
            defer { state.waiter = nil }
            return state.waiter
        }
        waiter?.resume(returning: nil)
    }

    /// Appends up to `maximum` buffered events to `batch`, without waiting.
    func take(upTo maximum: Int, into batch: inout [PGListenerEvent]) {
        guard maximum > 0 else { return }
        state.withLock { state in
            let end = min(state.buffer.count, state.head + maximum)
            guard end > state.head else { return }
            batch.append(contentsOf: state.buffer[state.head..<end])
            state.head = end
            if state.head == state.buffer.count {
                state.buffer.removeAll(keepingCapacity: state.buffer.capacity <= 1024)
                state.head = 0
            }
        }
    }

    /// How many times the buffer overflowed.
    var overflows: Int { state.withLock { $0.overflows } }

    func next() async -> PGListenerEvent? {
        await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<PGListenerEvent?, Never>) in
                let immediate: PGListenerEvent?? = state.withLock { state in
                    if state.count > 0 {
                        let event = state.buffer[state.head]
                        state.head += 1
                        if state.head > 1024, state.head * 2 > state.buffer.count {
                            state.buffer.removeFirst(state.head)
                            state.head = 0
                        }
                        return .some(event)
                    }
                    if state.finished || Task.isCancelled { return .some(nil) }
                    state.waiter = continuation
                    return .none
                }
                if let immediate { continuation.resume(returning: immediate) }
            }
        } onCancel: {
            let waiter = state.withLock { state -> CheckedContinuation<PGListenerEvent?, Never>? in
                defer { state.waiter = nil }
                return state.waiter
            }
            waiter?.resume(returning: nil)
        }
    }
}
