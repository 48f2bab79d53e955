import Foundation
@testable import Relay
import Testing

/// The sealed answers kept for replays are bounded in count and age.
@Suite struct SealedAnswerMemoryTests {
    @Test func theOldestAnswerMakesRoomAtCapacity() {
        let memory = SealedAnswerMemory(capacity: 2)
        let ids = [UUID(), UUID(), UUID()]
        for (index, id) in ids.enumerated() { memory.remember("sealed\(index)", for: id) }
        #expect(memory.sealed(for: ids[0]) == nil)
        #expect(memory.sealed(for: ids[1]) == "sealed1" && memory.sealed(for: ids[2]) == "sealed2")
        for _ in 0..<1_000 { memory.remember("more", for: UUID()) }
        #expect(memory.count == 2)
    }

    @Test func answersPastTheirLifetimeAreGone() {
        let memory = SealedAnswerMemory(lifetime: .zero)
        let id = UUID()
        memory.remember("sealed", for: id)
        #expect(memory.sealed(for: id) == nil)
    }
}
