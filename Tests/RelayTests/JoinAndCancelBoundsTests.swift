import Foundation
import JSON
@testable import Relay
@testable import RelayCore
import Testing

/// What a repeated ask joins and what an explicit cancel finds are bounded memory: the
/// registries empty themselves when full, entries end with their TTL, and an outcome
/// nobody received is kept only `SyncOutcome.undeliveredTTL`.
@Suite struct JoinAndCancelBoundsTests {
    func key(_ n: Int, owner: UUID = UUID(uuidString: "00000000-0000-4000-8000-000000000001")!) -> JoinableRequests.Key {
        JoinableRequests.Key(user: owner, clientID: "client-\(n)", keyID: nil, owner: owner)
    }

    @Test func joinableRequestsAreBoundedAndEndWithTheirTTL() throws {
        let joins = JoinableRequests()
        let now = Date()
        for n in 0..<JoinableRequests.maximumEntries {
            joins.remember(try RequestToken(), for: key(n), until: now.addingTimeInterval(n == 0 ? 1 : 600), now: now)
        }
        #expect(joins.count == JoinableRequests.maximumEntries)
        #expect(joins.token(for: key(0), now: now.addingTimeInterval(2)) == nil, "past its TTL: gone")
        // Full: the expired are dropped first, then everything if still full; never more.
        joins.remember(try RequestToken(), for: key(-1), until: now.addingTimeInterval(600), now: now.addingTimeInterval(2))
        #expect(joins.count <= JoinableRequests.maximumEntries)
        let token = try RequestToken()
        joins.remember(token, for: key(-2), until: now.addingTimeInterval(600), now: now)
        #expect(joins.token(for: key(-2), now: now)?.id == token.id)
        joins.handedOver(token, now: now, hungUp: false)
        #expect(joins.token(for: key(-2), now: now) == nil, "handed to a call (found by its token alone): the next ask is new")
    }

    @Test func anOutcomeHandedToACallIsJoinedAgainOnlyAfterAHangUpAndOnlyForAWhile() throws {
        let joins = JoinableRequests()
        let now = Date()
        let window = JoinableRequests.redeliveryWindow
        let until = now.addingTimeInterval(600)
        let (missed, late, waited, plain) = (try RequestToken(), try RequestToken(), try RequestToken(), try RequestToken())
        for (n, token) in [missed, late, waited, plain].enumerated() { joins.remember(token, for: key(n), until: until, now: now) }
        // The call's own caller had left: the outcome reached nobody, and stays joinable.
        joins.handedOver(missed, now: now, hungUp: true)
        #expect(joins.token(for: key(0), now: now.addingTimeInterval(window * 2))?.id == missed.id)
        // Handed over, then the client's late cancel said it had timed out: joinable a while.
        joins.handedOver(late, now: now, hungUp: false)
        joins.hungUp(late)
        #expect(joins.token(for: key(1), now: now.addingTimeInterval(window - 1))?.id == late.id)
        #expect(joins.token(for: key(1), now: now.addingTimeInterval(window + 1)) == nil, "past the window: a new ask")
        // A call of it hung up before; a later call got the outcome: joinable a while.
        joins.hungUp(waited)
        joins.handedOver(waited, now: now, hungUp: false)
        #expect(joins.token(for: key(2), now: now.addingTimeInterval(1))?.id == waited.id)
        // Nobody hung up: the next ask is a new one at once.
        joins.handedOver(plain, now: now, hungUp: false)
        #expect(joins.token(for: key(3), now: now) == nil)
        joins.hungUp(plain)
        #expect(joins.token(for: key(3), now: now) == nil, "forgotten when found unjoinable")
    }

    @Test func anOutcomeNobodyReceivedIsKeptAMinuteAndAFailureIsNeverJoined() async throws {
        let settled = SyncOutcome()
        let now = Date()
        #expect(!settled.publish(.abandoned, now: now), "nobody waited")
        #expect(settled.joinable(now: now.addingTimeInterval(SyncOutcome.undeliveredTTL - 1)))
        #expect(!settled.joinable(now: now.addingTimeInterval(SyncOutcome.undeliveredTTL + 1)))
        #expect(await settled.outcome() == .abandoned, "a late joiner gets it at once")
        let failed = SyncOutcome()
        let waiting = Task { await failed.outcome() }
        try await Task.sleep(for: .milliseconds(50))
        failed.fail(now: now)
        #expect(await waiting.value == nil)
        #expect(!failed.joinable(now: now))
        let left = SyncOutcome()
        let gone = Task { await left.outcome() }
        gone.cancel()
        #expect(await gone.value == nil, "a joiner whose caller left stops waiting")
    }

    @Test func inFlightCallsAreBoundedAndOnlyTheirCredentialFindsThem() throws {
        let calls = InFlightCalls()
        let user = UUID()
        func agent(_ client: String) -> AgentIdentity {
            AgentIdentity(userID: user, clientID: client, keyID: nil, keyName: nil, email: nil)
        }
        for n in 0..<InFlightCalls.maximumEntries { calls.begin(.number(Double(n)), token: try RequestToken(), for: agent("a")) }
        let overflow = try RequestToken()
        calls.begin(.string("one more"), token: overflow, for: agent("a"))
        #expect(calls.token(of: .string("one more"), for: agent("a")) == nil, "full: a new call is not remembered")
        let now = Date()
        calls.end(.number(0), for: agent("a"), now: now)
        calls.begin(.string("one more"), token: overflow, for: agent("a"))
        #expect(calls.token(of: .string("one more"), for: agent("a"))?.id == overflow.id)
        #expect(calls.token(of: .number(0), for: agent("a")) == nil, "ended")
        let late = now.addingTimeInterval(InFlightCalls.lateCancelWindow - 1)
        #expect(calls.recentToken(of: .number(0), for: agent("a"), now: late) != nil, "a late cancel still finds it")
        #expect(calls.recentToken(of: .number(0), for: agent("b"), now: late) == nil)
        #expect(calls.recentToken(of: .number(0), for: agent("a"), now: late.addingTimeInterval(2)) == nil, "not too late")
        // Ended calls expire a generation at a time, and a flood of them is bounded.
        for n in 1..<InFlightCalls.maximumEntries { calls.end(.number(Double(n)), for: agent("a"), now: now) }
        calls.end(.string("one more"), for: agent("a"), now: now)
        #expect(calls.recentToken(of: .string("one more"), for: agent("a"), now: now) == nil, "full: not remembered")
        let later = now.addingTimeInterval(InFlightCalls.lateCancelWindow * 3)
        calls.begin(.string("last"), token: overflow, for: agent("a"))
        calls.end(.string("last"), for: agent("a"), now: later)
        #expect(calls.recentToken(of: .string("last"), for: agent("a"), now: later) != nil, "a new generation has room")
        #expect(calls.recentToken(of: .number(2), for: agent("a"), now: now) == nil, "the old generations are gone")
        #expect(calls.token(of: .string("one more"), for: agent("b")) == nil, "another agent's cancel finds nothing")
        #expect(calls.token(of: .null, for: agent("a")) == nil, "a null id names no call")
    }
}
