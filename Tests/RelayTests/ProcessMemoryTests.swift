import Crypto
import Foundation
@testable import Relay
import Testing

/// A relay's own memory and ids: request ids from OpenSSL's
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
        let trimmer = HeapTrimmer(minimumSpacing: .zero)
        trimmer.trimIfWorthIt()  // whatever earlier tests left
        let before = trimmer.trims
        let blocks = burst()
        let freed = trimmer.look()
        #expect(freed.free >= 24 << 20, "the burst's blocks are free to the allocator")
        let resident = HeapTrimmer.resident()
        // Trimmed once the heap is steady: at this look, or (if other tests' allocations
        // moved it meanwhile) at the next.
        #expect(trimmer.trimIfWorthIt() || trimmer.trimIfWorthIt())
        #expect(trimmer.trims == before + 1)
        #expect(HeapTrimmer.resident() < resident - (16 << 20), "and their pages are given back to the system")
        #expect(!trimmer.trimIfWorthIt(), "nothing more came free: no second trim")
        #expect(trimmer.trims == before + 1)
        for block in blocks { free(block) }
    }

    /// A burst that goes on after a trim — as much allocated and freed again — leaves the
    /// allocator's counts where the trim left them while the pages are resident again: the
    /// resident set says it moved, and the next steady look trims again. Before, "nothing
    /// moved" held the trim back until the next burst.
    @Test func pagesMadeResidentAgainAfterATrimAreGivenBackAgain() throws {
        let trimmer = HeapTrimmer(minimumSpacing: .zero)
        trimmer.trimIfWorthIt()
        let blocks = burst()
        #expect(trimmer.trimIfWorthIt() || trimmer.trimIfWorthIt())
        let trims = trimmer.trims
        let trimmedTo = HeapTrimmer.resident()
        // The same blocks again, written (resident), then freed: the counts as they were.
        let again = (0..<(32 << 20) / 4096).map { _ in malloc(4000)! }
        for block in again { memset(block, 1, 4000) }
        for block in again { free(block) }
        #expect(HeapTrimmer.resident() > trimmedTo + (16 << 20), "the pages are resident again")
        #expect(trimmer.trimIfWorthIt() || trimmer.trimIfWorthIt(), "and given back again")
        #expect(trimmer.trims == trims + 1)
        #expect(HeapTrimmer.resident() < trimmedTo + (8 << 20))
        for block in blocks { free(block) }
    }

    /// Before: the maintenance beat looked every 5 s and needed two looks to call the heap
    /// steady, so a burst's memory stayed resident 5-10 s (three bench runs in four measured
    /// 18,000 phones untrimmed a beat after the burst). `run()` looks by itself.
    @Test func runLooksAndTrimsByItself() async throws {
        let trimmer = HeapTrimmer(minimumSpacing: .zero)
        trimmer.trimIfWorthIt()
        let before = trimmer.trims
        let looking = Task { await trimmer.run(every: .milliseconds(20)) }
        defer { looking.cancel() }
        let blocks = burst()
        defer { for block in blocks { free(block) } }
        for _ in 0..<500 where trimmer.trims == before {
            try await Task.sleep(for: .milliseconds(20))  // real time: run() sleeps on the real clock
        }
        #expect(trimmer.trims > before, "the burst's free memory was given back without a call")
        looking.cancel()
        await looking.value  // and run() ends when its task is cancelled
    }

    @Test func trimsAreSpaced() {
        let trimmer = HeapTrimmer(minimumSpacing: .seconds(3600))
        trimmer.trimIfWorthIt()
        let first = burst()
        trimmer.trimIfWorthIt()
        trimmer.trimIfWorthIt()  // steady at the latest here
        let trims = trimmer.trims
        #expect(trims >= 1, "a first trim is not held back")
        let second = burst(mebibytes: 64)  // twice as much: more comes free than the first trim left
        trimmer.trimIfWorthIt()
        trimmer.trimIfWorthIt()
        #expect(trimmer.trims == trims, "a second within the spacing waits, however much came free")
        #expect(trimmer.look().free > HeapTrimmer.threshold)
        for block in first + second { free(block) }
    }

    /// `mebibytes` (32) in blocks below the mmap threshold (they come from the heap, as a burst's
    /// buffers do), of which every 64th stays, as the sockets that stay connected do, so the
    /// rest is free in the middle of the heap: free to the allocator, yet resident. Returns
    /// the blocks still held.
    private func burst(mebibytes: Int = 32) -> [UnsafeMutableRawPointer] {
        var blocks: [UnsafeMutableRawPointer] = []
        for _ in 0..<(mebibytes << 20) / 4096 {
            let block = malloc(4000)!
            memset(block, 1, 4000)
            blocks.append(block)
        }
        for (index, block) in blocks.enumerated() where index % 64 != 0 { free(block) }
        return blocks.enumerated().filter { $0.offset % 64 == 0 }.map(\.element)
    }
}
