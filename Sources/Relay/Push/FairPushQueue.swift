/// The pushes of one instance waiting to be sent, shared fairly between accounts (docs/security.md,
/// "One account never degrades another"):
/// an I/O-free state machine whose events return which jobs start now and which are refused.
///
/// Each account has its own FIFO queue; a free slot goes to the waiting account with the
/// fewest jobs in flight (in turn among equals: round robin), never to the account with the
/// longest backlog, so an account with nothing in flight starts next; and no account holds more
/// than `maximumInFlightPerAccount` of the `maximumInFlight` slots. An account's queue is
/// bounded: past `maximumQueuedPerAccount` its new jobs are refused at once, so a flooding
/// account fills only its own queue and another account's push waits for one slot at most.
struct FairPushQueue<Job, Account: Hashable> {
    /// What the caller does.
    enum Action {
        /// Send this job now; report `finished(account)` when it is done.
        case start(Job)
        /// Never send this job (its account's queue is full).
        case refuse(Job)
    }

    /// Jobs in flight at once, all accounts together.
    let maximumInFlight: Int
    /// Jobs of one account in flight at once.
    let maximumInFlightPerAccount: Int
    /// Jobs of one account waiting at once.
    let maximumQueuedPerAccount: Int

    private var waiting: [Account: [Job]] = [:]
    private var running: [Account: Int] = [:]
    /// Accounts with waiting jobs, in turn order (each at most once).
    private var turns: [Account] = []
    private var inFlight = 0

    /// A queue with its bounds.
    init(maximumInFlight: Int = 64, maximumInFlightPerAccount: Int = 16, maximumQueuedPerAccount: Int = 256) {
        precondition(maximumInFlight > 0 && maximumInFlightPerAccount > 0 && maximumQueuedPerAccount >= 0)
        self.maximumInFlight = maximumInFlight
        self.maximumInFlightPerAccount = maximumInFlightPerAccount
        self.maximumQueuedPerAccount = maximumQueuedPerAccount
    }

    /// Jobs in flight and waiting, all accounts together.
    var counts: (inFlight: Int, waiting: Int) { (inFlight, waiting.values.reduce(0) { $0 + $1.count }) }

    /// A job of `account` wants to be sent.
    mutating func submit(_ job: Job, account: Account) -> [Action] {
        if waiting[account] == nil, inFlight < maximumInFlight, running[account, default: 0] < maximumInFlightPerAccount {
            begin(account)
            return [.start(job)]
        }
        guard waiting[account, default: []].count < maximumQueuedPerAccount else { return [.refuse(job)] }
        if waiting[account] == nil { turns.append(account) }
        waiting[account, default: []].append(job)
        return []
    }

    /// A job of `account` is done: its slot goes to the next account in turn.
    mutating func finished(account: Account) -> [Action] {
        precondition(inFlight > 0 && running[account, default: 0] > 0, "finished without a start")
        inFlight -= 1
        running[account, default: 0] -= 1
        if running[account] == 0 { running[account] = nil }
        var actions: [Action] = []
        while inFlight < maximumInFlight, let index = nextTurn() {
            let next = turns.remove(at: index)
            var jobs = waiting[next]!
            actions.append(.start(jobs.removeFirst()))
            begin(next)
            if jobs.isEmpty {
                waiting[next] = nil
            } else {
                waiting[next] = jobs
                turns.append(next)
            }
        }
        return actions
    }

    /// The waiting account with the fewest jobs in flight (the first in turn among equals),
    /// if any may start one.
    private func nextTurn() -> Int? {
        var best: (index: Int, running: Int)?
        for (index, account) in turns.enumerated() {
            let running = running[account, default: 0]
            guard running < maximumInFlightPerAccount else { continue }
            if best == nil || running < best!.running { best = (index, running) }
            if running == 0 { break }
        }
        return best?.index
    }

    private mutating func begin(_ account: Account) {
        inFlight += 1
        running[account, default: 0] += 1
    }
}
