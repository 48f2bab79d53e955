import Foundation
@testable import Relay
import Synchronization
import Testing
import TestSupport

/// Poll bounds (docs/security.md, "Under floods": waiting polls and the budget of unknown
/// ids): each bound is reached
/// here, as an agent holding long polls or guessing ids would reach it.
@Suite struct PollLimiterTests {
    /// Holds polls open (each gets the wait the limiter granted) until released.
    final class Held: Sendable {
        let granted = Mutex<[Duration]>([])
        let waiters = Mutex<[CheckedContinuation<Void, Never>]>([])
        func poll(_ wait: Duration) async -> LocateService.Resumed {
            granted.withLock { $0.append(wait) }
            if wait > .zero { await withCheckedContinuation { continuation in waiters.withLock { $0.append(continuation) } } }
            return .unknown
        }
        func release() { for waiter in waiters.withLock({ state in defer { state = [] }; return state }) { waiter.resume() } }
    }

    func binding(_ user: UUID, _ client: String = "c") -> RelayDatabase.Binding {
        RelayDatabase.Binding(AgentIdentity(userID: user, clientID: client, keyID: nil, keyName: nil, email: nil))
    }

    /// Starts `count` polls of `tokens` by `binding` and waits until each has been given its wait.
    func start(_ limiter: PollLimiter, _ held: Held, _ polls: [(RequestToken, RelayDatabase.Binding)],
               in group: inout TaskGroup<Void>) async {
        let before = held.granted.withLock { $0.count }
        for (token, binding) in polls {
            group.addTask { _ = await limiter.polling(token, by: binding, wait: .seconds(30)) { await held.poll($0) } }
        }
        try? await eventually("each poll was given its wait") { held.granted.withLock { $0.count } >= before + polls.count }
    }

    @Test func onePollPerRequestAndCredentialWaits() async throws {
        let limiter = PollLimiter(), held = Held(), token = try RequestToken(), ada = binding(UUID())
        await withTaskGroup(of: Void.self) { group in
            await start(limiter, held, Array(repeating: (token, ada), count: 3), in: &group)
            #expect(held.granted.withLock { $0 }.filter { $0 > .zero }.count == 1, "the others are answered at once")
            #expect(limiter.waitingCount == 1)
            held.release()
        }
        #expect(limiter.waitingCount == 0, "a poll that ends gives its place back")
    }

    @Test func aCredentialAndAnAccountHaveTheirBounds() async throws {
        let limiter = PollLimiter(), held = Held(), user = UUID()
        await withTaskGroup(of: Void.self) { group in
            let first = (0..<25).map { _ in (try! RequestToken(), binding(user, "first")) }
            await start(limiter, held, first, in: &group)
            #expect(limiter.waitingCount == PollLimiter.maximumWaitingPerCredential, "20 of one credential wait")
            let others = (0..<40).map { n in (try! RequestToken(), binding(user, "other-\(n % 2)")) }
            await start(limiter, held, others, in: &group)
            #expect(limiter.waitingCount == PollLimiter.maximumWaitingPerAccount, "50 of one account wait")
            await start(limiter, held, [(try! RequestToken(), binding(UUID()))], in: &group)
            #expect(limiter.waitingCount == PollLimiter.maximumWaitingPerAccount + 1, "another account's poll still waits")
            held.release()
        }
        #expect(limiter.waitingCount == 0)
    }

    @Test func unknownIdsSpendTheCredentialsBudget() async throws {
        let clock = try ManualClock()
        let limiter = PollLimiter(clock: clock.relay), ada = binding(UUID())
        for _ in 0..<Int(PollLimiter.unknownBurst) {
            let token = try RequestToken()
            #expect(limiter.take(token, by: ada) == nil)
            #expect(await limiter.polling(token, by: ada, wait: .zero) { _ in .unknown } == .unknown)
        }
        #expect(limiter.take(try RequestToken(), by: ada) == 1, "past the budget: Retry-After, before any read")
        #expect(limiter.take(try RequestToken(), by: binding(UUID())) == nil, "another credential's budget is its own")
        await clock.advance(1)
        #expect(limiter.take(try RequestToken(), by: ada) == nil, "one a second comes back")
    }
}
