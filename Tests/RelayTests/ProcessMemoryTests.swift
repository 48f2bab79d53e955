import Foundation
@testable import Relay
import Testing

/// What issue 43 added for a relay's own memory and ids: request ids from OpenSSL's
/// generator (version 4, unique), and the allocator's free memory given back when enough
/// sits free — and left alone when not.
@Suite(.serialized) struct ProcessMemoryTests {
    @Test func requestIDsAreVersion4AndUnique() {
        var seen = Set<UUID>()
        for _ in 0..<10_000 {
            let id = RandomUUID.make()
            let bytes = id.uuid
            #expect(bytes.6 >> 4 == 4, "version 4")
            #expect(bytes.8 >> 6 == 0b10, "RFC 9562 variant")
            seen.insert(id)
        }
        #expect(seen.count == 10_000)
    }

    @Test func aBurstsFreedMemoryIsGivenBack() throws {
        let trimmer = HeapTrimmer()
        trimmer.trimIfWorthIt()  // whatever earlier tests left
        let before = trimmer.trims
        // 32 MiB in blocks below the mmap threshold (they come from the heap, as a burst's
        // buffers do); every 64th stays, as the sockets that stay connected do, so the rest
        // is free in the middle of the heap: free to the allocator, yet resident.
        var blocks: [UnsafeMutableRawPointer] = []
        for _ in 0..<(32 << 20) / 4096 {
            let block = malloc(4000)!
            memset(block, 1, 4000)
            blocks.append(block)
        }
        for (index, block) in blocks.enumerated() where index % 64 != 0 { free(block) }
        let freed = trimmer.look()
        #expect(freed.free >= 24 << 20, "the burst's blocks are free to the allocator")
        let resident = try residentBytes()
        // Trimmed once the heap is steady: at this look, or (if other tests' allocations
        // moved it meanwhile) at the next.
        #expect(trimmer.trimIfWorthIt() || trimmer.trimIfWorthIt())
        #expect(trimmer.trims == before + 1)
        #expect(try residentBytes() < resident - (16 << 20), "and their pages are given back to the system")
        #expect(!trimmer.trimIfWorthIt(), "nothing more came free: no second trim")
        #expect(trimmer.trims == before + 1)
        for (index, block) in blocks.enumerated() where index % 64 == 0 { free(block) }
    }

    /// The process's resident set (/proc/self/statm, in pages).
    private func residentBytes() throws -> Int {
        let fields = try String(contentsOfFile: "/proc/self/statm", encoding: .utf8).split(separator: " ")
        return Int(fields[1])! * Int(sysconf(Int32(_SC_PAGESIZE)))
    }
}
