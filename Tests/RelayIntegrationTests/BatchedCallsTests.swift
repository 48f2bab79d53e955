import Foundation
import PGBus
@testable import Relay
@testable import RelayCore
import Testing
import TestSupport

/// Opens and settles that pile up behind calls in flight reach the real database as one
/// `relay.open_requests` / `relay.settle_many` call, and every caller gets its own result;
/// one refused element fails only its own caller.
@Suite struct BatchedCallsTests {
    let instance = "batch-\(UUID().uuidString.prefix(8).lowercased())"

    @Test func opensAndSettlesThatPileUpGoAsBatches() async throws {
        let admin = try await TestDatabase.admin()
        defer { Task { await admin.close() } }
        let ada = try await TestDatabase.makeUser(admin), bob = try await TestDatabase.makeUser(admin, name: "Bob")
        let db = TestDatabase.relay()
        try await db.registerInstance(instance)
        let key = try ReplyKey().publicKey
        let ids = (0..<40).map { _ in UUID() }
        let refused = ids[17]

        // The owner's lock, held here, stops the first calls in flight; the rest wait for them.
        let lock = "select pg_advisory_lock(hashtextextended('whereabot_open_request:' || $1::text, 0))"
        try await admin.query(lock, [ada.user])
        let opened = try await withThrowingTaskGroup(of: (UUID, Result<RelayStatus.Open, PGError>).self) { group in
            for id in ids {
                group.addTask {
                    do {
                        let opened = try await db.openRequest(id: id, owner: ada.user, requester: nil, clientID: "agent", clientName: nil,
                                                              instance: instance, replyKey: id == refused ? [1, 2, 3] : key,
                                                              expiresAt: Date().addingTimeInterval(60), maxWaiting: 100)
                        return (id, .success(opened.status))
                    } catch let error as PGError {
                        return (id, .failure(error))
                    }
                }
            }
            try await eventually("the opens behind the held ones wait") {
                db.opens.waitingCount >= ids.count - RelayDatabase.callsInFlight
            }
            #expect(db.opens.waitingCount == ids.count - RelayDatabase.callsInFlight)
            try await admin.query("select pg_advisory_unlock(hashtextextended('whereabot_open_request:' || $1::text, 0))", [ada.user])
            var results: [UUID: Result<RelayStatus.Open, PGError>] = [:]
            for try await (id, result) in group { results[id] = result }
            return results
        }
        #expect(db.opens.batchesMade >= 1)
        #expect(opened.count == ids.count)
        for id in ids where id != refused { #expect(opened[id] == .success(.opened)) }
        #expect(opened[refused].flatMap { if case .failure(let error) = $0 { error.sqlState } else { nil } } == "22023",
                "the refused element's caller gets open_request's SQLSTATE")

        // Settles: the rows locked here stop the first settles; the rest pile up behind them.
        try await admin.query("begin")
        try await admin.query("select from relay.pending_requests where id = any($1) for update", [ids])
        let settled = try await withThrowingTaskGroup(of: (UUID, RelayStatus.Settle).self) { group in
            for (index, id) in ids.enumerated() where id != refused {
                group.addTask {
                    // One answer in the batch comes from another user: forbidden, alone.
                    let user = index == 3 ? bob.user : ada.user
                    return (id, try await db.settle(id: id, user: user, device: nil, answer: .denied(reason: .user), instance: instance))
                }
            }
            try await eventually("the settles behind the locked ones wait") {
                db.settles.waitingCount >= ids.count - 1 - RelayDatabase.callsInFlight
            }
            try await admin.query("commit")
            var results: [UUID: RelayStatus.Settle] = [:]
            for try await (id, status) in group { results[id] = status }
            return results
        }
        #expect(db.settles.batchesMade >= 1)
        #expect(settled[ids[3]] == .forbidden)
        for (index, id) in ids.enumerated() where id != refused && index != 3 { #expect(settled[id] == .settled) }
        let rows = try await admin.query("select count(*)::int from relay.pending_requests where id = any($1) and outcome = 'denied'", [ids])
        #expect(try rows.scalar(Int.self) == ids.count - 2)
    }
}

extension BatchedCallsTests {
    /// A row locked elsewhere stops only its own element: the batch gives up on it after
    /// its lock timeout (55P03) and the relay settles it alone, which waits for the lock.
    @Test func anElementWhoseRowIsLockedIsSettledAlone() async throws {
        let admin = try await TestDatabase.admin(), holder = try await TestDatabase.admin()
        defer { Task { await admin.close(); await holder.close() } }
        let ada = try await TestDatabase.makeUser(admin)
        let db = TestDatabase.relay()
        try await db.registerInstance(instance)
        let key = try ReplyKey().publicKey
        let ids = (0..<4).map { _ in UUID() }
        for id in ids {
            _ = try await db.openRequest(id: id, owner: ada.user, requester: nil, clientID: "agent", clientName: nil, instance: instance,
                                         replyKey: key, expiresAt: Date().addingTimeInterval(60), maxWaiting: 100)
        }
        let target = ids[2]
        try await holder.query("begin")
        try await holder.query("select from relay.pending_requests where id = $1 for update", [target])
        let calls = ids.map { RelayDatabase.SettleCall(id: $0, user: ada.user, device: nil, answer: .denied(reason: .user), instance: instance) }
        let batch = Task { try await db.settles.batch(calls) }
        // The batch gives up on the target after 50 ms and waits in the single call for it.
        // Until the single call waits for this test's holder (not for another test's locks), and
        // no longer: a `for … where` would go on querying after the first sight.
        let holderPID = try await holder.query("select pg_backend_pid()").scalar(Int.self)
        try await eventually("the single call waits for the holder") {
            try await admin.query(
                "select count(*)::int from pg_stat_activity where $1 = any(pg_blocking_pids(pid)) and query like 'select relay.settle(%'",
                [holderPID]).scalar(Int.self) > 0
        }
        let others = try await admin.query("select count(*)::int from relay.pending_requests where id = any($1) and outcome = 'denied'", [ids])
        #expect(try others.scalar(Int.self) == 3, "the other elements settled while the locked one waits alone")
        try await holder.query("commit")
        let results = try await batch.value
        #expect(results.count == 4)
        for result in results { #expect((try? result.get()) == .settled) }
    }
}
