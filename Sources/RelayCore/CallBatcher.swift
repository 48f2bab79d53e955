/// Collects items for one set-based database call: the first item opens a window of
/// `window`; when it ends (or `maximumBatch` items are waiting) they go out together. At
/// most `maximumInFlight` calls run at once; items arriving meanwhile wait for the next.
/// With a window of zero an item goes at once when a call slot is free, and what arrives
/// while the calls run goes together when one returns (no added latency when idle).
///
/// A state machine without I/O: every event returns the actions to perform (arm the
/// window's timer, send a batch). Hellos, disconnects and delivered marks use one each, so
/// a storm of N sockets costs N / batch calls, not N.
package struct CallBatcher<Item> {
    /// What the owner must do after an event.
    package enum Action {
        /// Call `windowEnded()` after this long.
        case armTimer(Duration)
        /// Make one call with these items, then call `sent()`.
        case send([Item])
    }

    package let window: Duration
    package let maximumBatch: Int
    package let maximumInFlight: Int
    package private(set) var waiting: [Item] = []
    private var timerArmed = false
    package private(set) var inFlight = 0

    /// A batcher; `maximumBatch` and `maximumInFlight` are at least 1.
    package init(window: Duration, maximumBatch: Int, maximumInFlight: Int = 1) {
        self.window = window
        self.maximumBatch = max(1, maximumBatch)
        self.maximumInFlight = max(1, maximumInFlight)
    }

    /// An item to send.
    package mutating func add(_ item: Item) -> [Action] {
        waiting.append(item)
        if waiting.count >= maximumBatch || window == .zero { return sendable() }
        if timerArmed { return [] }
        timerArmed = true
        return [.armTimer(window)]
    }

    /// Takes a call slot for an item its owner sends at once by itself (without queueing
    /// it) when one is free and nothing waits; `sent()` gives the slot back as for a batch.
    package mutating func takeSlotIfFree() -> Bool {
        guard waiting.isEmpty, inFlight < maximumInFlight else { return false }
        inFlight += 1
        return true
    }

    /// The window's timer fired: send what waits.
    package mutating func windowEnded() -> [Action] {
        timerArmed = false
        return sendable()
    }

    /// A call finished: what waited for a free slot goes out.
    package mutating func sent() -> [Action] {
        inFlight -= 1
        return timerArmed && waiting.count < maximumBatch ? [] : sendable()
    }

    /// Batches while slots are free; the rest waits (with the timer armed for it).
    private mutating func sendable() -> [Action] {
        var actions: [Action] = []
        while !waiting.isEmpty, inFlight < maximumInFlight {
            let count = min(maximumBatch, waiting.count)
            actions.append(.send(Array(waiting.prefix(count))))
            waiting.removeFirst(count)
            inFlight += 1
        }
        if waiting.isEmpty, waiting.capacity > 64 { waiting = [] }  // a surge's buffer is given back, a small one kept
        return actions
    }
}
