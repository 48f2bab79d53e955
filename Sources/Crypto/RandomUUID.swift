import COpenSSL
import Foundation

/// Version-4 UUIDs from OpenSSL's generator, in user space.
///
/// Foundation's `UUID()` reads /dev/urandom on Linux — an open, a read and a close per id,
/// 2.3 µs here and 2.4 % of a relay's CPU under the locate bench (docs/benchmarks.md). A request's id
/// comes from here instead: as unpredictable (a CSPRNG), without a system call.
public enum RandomUUID {
    /// A fresh random (version 4, RFC 9562) UUID; Foundation's when OpenSSL's generator fails.
    public static func make() -> UUID {
        var bytes: uuid_t = (0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)
        let filled = withUnsafeMutableBytes(of: &bytes) { RAND_bytes($0.baseAddress!.assumingMemoryBound(to: UInt8.self), 16) }
        guard filled == 1 else { return UUID() }
        bytes.6 = (bytes.6 & 0x0F) | 0x40  // version 4
        bytes.8 = (bytes.8 & 0x3F) | 0x80  // the RFC's variant
        return UUID(uuid: bytes)
    }
}
