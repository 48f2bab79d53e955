import COpenSSL
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
    private let state: Mutex<(keys: [Key], refilling: Bool)>

    /// A generated key pair waiting in the pool (owned by the pool until taken).
    private struct Key: @unchecked Sendable { let pointer: OpaquePointer }

    init(capacity: Int) {
        self.capacity = max(1, capacity)
        self.state = Mutex(([], false))
    }

    deinit {
        state.withLock { $0.keys.forEach { EVP_PKEY_free($0.pointer) } }
    }

    /// A fresh key pair the caller owns (and frees): from the pool, or generated now.
    func take() throws -> OpaquePointer {
        let (key, refill) = state.withLock { state -> (Key?, Bool) in
            let key = state.keys.popLast()
            let refill = !state.refilling && state.keys.count < capacity / 2
            if refill { state.refilling = true }
            return (key, refill)
        }
        if refill { startRefill() }
        if let key { return key.pointer }
        return try X25519.generate()
    }

    /// Keys waiting now (for tests).
    var count: Int { state.withLock { $0.keys.count } }

    private func startRefill() {
        let thread = Thread { [self] in
            while true {
                guard let key = try? X25519.generate() else {
                    state.withLock { $0.refilling = false }
                    return
                }
                let full = state.withLock { state -> Bool in
                    state.keys.append(Key(pointer: key))
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
