import Foundation

/// One locate as both transports (HTTP and MCP) ask it: resolve `person` for shared
/// locations, ask the phones, and phrase the result.
struct LocateService: Sendable {
    let coordinator: LocateCoordinator
    let database: RelayDatabase
    let metrics: LocateMetrics
    let clientNames: ClientNames

    /// What the agent gets: the fix JSON (200), or a failure with its status and text.
    enum Result: Sendable, Equatable {
        case fix(json: String, structured: String)
        case failure(AgentFailure)
        case abandoned

        /// The outcome label for /metrics (a fixed word).
        var metricName: String {
            switch self {
            case .fix: "location"
            case .abandoned: "abandoned"
            case .failure(let failure):
                switch failure {
                case .badCredential: "unauthorized"
                case .declined, .personDeclined: "declined"
                case .noAnswer: "no_answer"
                case .permissionOff: "permission"
                case .noFix: "no_fix"
                case .tooManyWaiting: "too_many"
                case .notConnected: "offline"
                case .phoneSilent: "timeout"
                case .nobodyNamed, .ambiguousPerson: "unknown_person"
                }
            }
        }
    }

    /// Locates the agent's own user, or `person` when someone who shares with them.
    /// - Throws: database errors (503 for the caller).
    func locate(agent: AgentIdentity, person: String?, timeoutSeconds: Int) async throws -> Result {
        let started = ContinuousClock.now
        let result = try await locateOnce(agent: agent, person: person, timeoutSeconds: timeoutSeconds)
        let elapsed = ContinuousClock.now - started
        let seconds = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
        metrics.record(outcome: result.metricName, seconds: seconds)
        return result
    }

    private func locateOnce(agent: AgentIdentity, person: String?, timeoutSeconds: Int) async throws -> Result {
        var owner = agent.userID
        var requester: UUID?
        var shared: Person?
        if let person = person?.trimmingCharacters(in: .whitespaces), !person.isEmpty {
            let matches = try await database.resolvePerson(viewer: agent.userID, person: String(person.prefix(320)))
            guard let match = matches.first else { return .failure(.nobodyNamed(person)) }
            guard matches.count == 1 else { return .failure(.ambiguousPerson(person, matches)) }
            guard let id = match.userID else { return .failure(.nobodyNamed(person)) }
            owner = id
            requester = agent.userID
            shared = match
        }
        let clientName: String? = if let keyName = agent.keyName { keyName } else { await clientNames.name(of: agent.clientID) }
        let outcome = try await coordinator.locate(.init(owner: owner, requester: requester, clientID: agent.clientID,
                                                         clientName: clientName, email: shared == nil ? agent.email : shared?.email,
                                                         timeout: .seconds(timeoutSeconds)))
        switch outcome {
        case .fix(let fix):
            let json = fix.agentJSON(now: Date(), person: shared)
            return .fix(json: json, structured: json)
        case .failure(.declined) where shared != nil:
            return .failure(.personDeclined(shared!.name))
        case .failure(let failure):
            return .failure(failure)
        case .abandoned:
            return .abandoned
        }
    }
}
