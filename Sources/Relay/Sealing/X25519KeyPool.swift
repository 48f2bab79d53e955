import Crypto
import Foundation
import Synchronization

/// X25519 key pairs generated ahead of time, off the locate's path.
///
/// A scalar multiplication costs ~40 µs here, and a locate needs two fresh key pairs (the
/// waiter's reply key, the holder's ephemeral sealing key). Taking them from this pool
/// moves that work to a background thread that refills the pool whenever it falls below
/// half; an empty pool generates inline, so nothing ever waits for the refill. Each key is
/// handed out once and freed by its taker; at most `capacity` wait unused.
final class X25519KeyPool: Sendable {
    /// The process's pool (key generation has no per-instance state).
    static let shared = X25519KeyPool(capacity: 128)

    private let capacity: Int
    private let state: Mutex<(keys: [X25519Key], refilling: Bool)>

    init(capacity: Int) {
        self.capacity = max(1, capacity)
        self.state = Mutex(([], false))
    }

    /// A fresh key pair, handed out once: from the pool, or generated now.
    func take() throws -> X25519Key {
        let (key, refill) = state.withLock { state -> (X25519Key?, Bool) in
            let key = state.keys.popLast()
            let refill = !state.refilling && state.keys.count < capacity / 2
            if refill { state.refilling = true }
            return (key, refill)
        }
        if refill { startRefill() }
        if let key { return key }
        return try X25519Key.generate()
    }

    /// Keys waiting now (for tests).
    var count: Int { state.withLock { $0.keys.count } }

    /// Whether a refill is under way (for tests).
    var isRefilling: Bool { state.withLock { $0.refilling } }

    private func startRefill() {
        let thread = Thread { [self] in
            while true {
                guard let key = try? X25519Key.generate() else {
                    state.withLock { $0.refilling = false }
                    return
                }
                let full = state.withLock { state -> Bool in
                    state.keys.append(key)
                    if state.keys.count >= capacity { state.refilling = false }
                    return !state.refilling
                }
                if full { return }
            }
        }
        thread.name = "x25519-pool"
        thread.stackSize = 1 << 18
        thread.start()
    }
}
