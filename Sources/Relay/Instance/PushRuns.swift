import Foundation

/// What the driver holds for the pushes of the requests opened here, beside their plans in
/// the value: each request's one timer, its last claim (what a send sends to), and its sends
/// under way — a request's sends go one after the other (the checking alert never overtakes
/// the wake), and the push transport's stop waits for them (`finish()`).
struct PushRuns {
    private var timers: [UUID: RelayTimers.Handle] = [:]
    private var claims: [UUID: PushClaim] = [:]
    private var sends: [UUID: (number: Int, task: Task<Void, Never>)] = [:]
    private var sendNumber = 0
    /// Set by `finish()`: no claim or send starts from now on.
    private(set) var finished = false

    /// Arms request `id`'s timer (replacing the one before).
    mutating func arm(_ id: UUID, _ timer: RelayTimers.Handle) {
        timers.removeValue(forKey: id)?.cancel()
        timers[id] = timer
    }

    /// Request `id` claimed a stage: what its send sends to (nil: nothing claimed).
    mutating func claimed(_ id: UUID, _ claim: PushClaim?) {
        claims[id] = claim
    }

    /// The last claim of request `id`.
    func claim(of id: UUID) -> PushClaim? {
        claims[id]
    }

    /// Request `id` pushes no more: its timer stops and its claim is forgotten (a send
    /// under way ends by itself).
    mutating func done(_ id: UUID) {
        timers.removeValue(forKey: id)?.cancel()
        claims[id] = nil
    }

    /// Starts a send of request `id` after its sends before: `start` gets the previous
    /// send's task (to wait for) and the send's number (for `sent`), and returns the task.
    mutating func send(_ id: UUID, _ start: (_ previous: Task<Void, Never>?, _ number: Int) -> Task<Void, Never>?) {
        sendNumber += 1
        guard let task = start(sends[id]?.task, sendNumber) else { return }
        sends[id] = (sendNumber, task)
    }

    /// Send `number` of request `id` ended (a newer one may have replaced it meanwhile).
    mutating func sent(_ id: UUID, _ number: Int) {
        if sends[id]?.number == number { sends[id] = nil }
    }

    /// No claim or send starts from now on: the sends under way, to wait for.
    mutating func finish() -> [Task<Void, Never>] {
        finished = true
        return sends.values.map(\.task)
    }
}
