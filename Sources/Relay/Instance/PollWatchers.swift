import Foundation

/// Polls of durable requests waiting here for an answer, by request and poll, and the
/// polls reading a row right now: an answer that arrives while its row is being read marks
/// the request woken, and the poll reads again instead of sleeping (no answer is missed
/// between the read and the sleep). Entries live only as long as a poll does.
struct PollWatchers {
    private var watching: [UUID: [UUID: CheckedContinuation<Void, Never>]] = [:]
    private var polling: [UUID: Int] = [:]
    private var woken: Set<UUID> = []

    /// A poll of `id` began.
    mutating func pollStarted(_ id: UUID) {
        polling[id, default: 0] += 1
    }

    /// A poll of `id` ended.
    mutating func pollEnded(_ id: UUID) {
        polling[id]! -= 1
        if polling[id] == 0 {
            polling[id] = nil
            woken.remove(id)
        }
    }

    /// A poll of `id` reads its row now (answers from now on mark it woken).
    mutating func reading(_ id: UUID) {
        woken.remove(id)
    }

    /// Whether an answer for `id` arrived since the last `reading`.
    func wasWoken(_ id: UUID) -> Bool {
        woken.contains(id)
    }

    /// Poll `key` of `id` sleeps until `wake` or `stop`.
    mutating func sleep(_ id: UUID, _ key: UUID, _ continuation: CheckedContinuation<Void, Never>) {
        watching[id, default: [:]][key] = continuation
    }

    /// Poll `key` of `id` stops sleeping (its wait ran out, or it was cancelled): its
    /// continuation, if it still sleeps.
    mutating func stop(_ id: UUID, _ key: UUID) -> CheckedContinuation<Void, Never>? {
        guard let continuation = watching[id]?.removeValue(forKey: key) else { return nil }
        if watching[id]?.isEmpty == true { watching[id] = nil }
        return continuation
    }

    /// `id`'s answer or cancel arrived: the polls sleeping for it, to resume, and polls
    /// reading its row are marked woken.
    mutating func wake(_ id: UUID) -> [CheckedContinuation<Void, Never>] {
        if polling[id] != nil { woken.insert(id) }
        guard let sleeping = watching.removeValue(forKey: id) else { return [] }
        return Array(sleeping.values)
    }

    /// Polls sleeping now (for tests and metrics).
    var sleeping: Int { watching.values.reduce(0) { $0 + $1.count } }
}
