import Crypto
import Foundation
@testable import Relay
import Testing
import TestSupport

/// Key pairs generated ahead of time: each handed out once, the pool refilled in the
/// background up to its capacity and never beyond, an empty pool still answering at once.
@Suite struct X25519KeyPoolTests {
    @Test func keysAreFreshBoundedAndRefilled() async throws {
        let pool = X25519KeyPool(capacity: 8)
        var publicKeys = Set<[UInt8]>()
        for _ in 0..<40 {  // far more than the pool holds: the rest are generated inline
            publicKeys.insert(try pool.take().publicKey)
        }
        #expect(publicKeys.count == 40)
        // Refilled (takes may race the last refills, so anywhere from half to full) and
        // never beyond the capacity, once the refill has stopped.
        try await eventually("the pool is refilled") { !pool.isRefilling && pool.count >= 4 }
        #expect((4...8).contains(pool.count))
        #expect(!publicKeys.contains(try pool.take().publicKey))
    }

    /// A pooled reply key opens what was sealed to it, and only that.
    @Test func pooledKeysSealAndOpen() throws {
        let reply = try ReplyKey(), other = try ReplyKey(), id = UUID()
        let sealed = try Sealing.seal(Array("fix".utf8), to: reply.publicKey, requestID: id)
        #expect(try reply.open(sealed, requestID: id) == Array("fix".utf8))
        #expect(throws: (any Error).self) { try other.open(sealed, requestID: id) }
    }
}
