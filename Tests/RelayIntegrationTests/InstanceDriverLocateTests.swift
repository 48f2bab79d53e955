import Foundation
import HTTPServer
import PGBus
@testable import Relay
@testable import RelayCore
import Testing
import TestSupport

/// The driver's waiting side end to end through Postgres: the request is opened, a simulated holder
/// of the phone on another instance reads the ping from its own channel and settles it
/// (sealed to the key the ping carries), the answer comes back on the waiter's channel, and
/// every status of the table results.
@Suite struct InstanceDriverLocateTests {
    let instance = "coord-\(UUID().uuidString.prefix(8).lowercased())"
    var holder: String { instance + "-holder" }

    /// How the simulated phone answers.
    enum Phone: Sendable {
        case fix(LocationFix)
        case answer(PhoneAnswer)
        case ignore
        case absent
    }

    /// The id of `owner`'s pending request, once its row is there.
    func pendingRequest(of owner: UUID) async throws -> UUID {
        let admin = try await TestDatabase.admin()
        defer { Task { await admin.close() } }
        var id: UUID?
        try await eventually("the request's row is written", every: .milliseconds(20)) {
            id = try await admin.query("select id from relay.pending_requests where owner_id = $1", [owner]).first?.decode(0, as: UUID.self)
            return id != nil
        }
        return try #require(id)
    }

    /// Runs `body` with a driver whose answers arrive over a real LISTEN, and a phone
    /// of `owner` that answers every ping as told.
    func withRelay<R: Sendable>(owner: UUID, session: UUID, phone: Phone, maxWaiting: Int = 5,
                                _ body: @escaping @Sendable (InstanceDriver) async throws -> R) async throws -> R {
        let db = TestDatabase.relay()
        try await db.registerInstance(instance)
        try await db.registerInstance(holder)  // a hello never creates its instance's row
        let device = UUID(), holder = self.holder, instance = self.instance
        if case .absent = phone {} else {
            _ = try await db.deviceHello(instance: holder, connection: UUID(), user: owner, session: session, device: device,
                                         name: "Test Phone", platform: "android", appVersion: "1", openedAt: Date())
        }
        let driver = try makeDriver(db, maxWaiting: maxWaiting)
        let listener = PGListener(configuration: PGConfiguration(TestDatabase.relayURL, applicationName: "coord-tests"))
        return try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask { await listener.run() }
            let ready = AsyncStream<Void>.makeStream()
            group.addTask {
                let channels = [RelayNotification.channel(of: instance), RelayNotification.channel(of: holder)]
                try await listener.listen(on: channels) { events in
                    for await event in events {
                        guard case .notification(let note) = event else { ready.continuation.yield(); continue }
                        switch RelayNotification.decode(channel: note.channel, payload: note.payload) {
                        case .answer(let answer, _)? where note.channel == channels[0]:
                            await driver.deliver(answer)
                        case .locate(let ping, let pingOwner)? where note.channel == channels[1]:
                            #expect(pingOwner == owner)  // a holder hears only of its phones' owners
                            #expect(try await db.markDelivered([ping.id]) == 1)
                            switch phone {
                            case .fix(let fix):
                                let key = try #require(ping.replyKey)
                                let sealed = try Sealing.seal(Array(fix.sealedJSON.utf8), to: key, requestID: ping.id)
                                _ = try await db.settle(id: ping.id, user: owner, device: device, answer: .location(sealed: sealed),
                                                        instance: holder)
                            case .answer(let answer):
                                _ = try await db.settle(id: ping.id, user: owner, device: device, answer: answer, instance: holder)
                            case .ignore, .absent:
                                break
                            }
                        case .cancel?:
                            break
                        default:
                            Issue.record("unexpected notification on \(note.channel): \(note.payload)")
                        }
                    }
                }
            }
            var readyIterator = ready.stream.makeAsyncIterator()
            _ = await readyIterator.next()
            let result = try await body(driver)
            listener.shutdown()
            try await group.waitForAll()
            return result
        }
    }

    /// A driver of this instance with no phones of its own: the phone is the simulated holder.
    func makeDriver(_ db: RelayDatabase, maxWaiting: Int = InstanceDriver.defaultMaxWaiting) throws -> InstanceDriver {
        let authenticator = try Authenticator(hmacSecret: String(repeating: "s", count: 32), jwks: .none, issuer: nil, database: db)
        return InstanceDriver(instance: instance, database: db, authenticator: authenticator, logger: Logger(level: .error),
                              grace: .milliseconds(300), maxWaiting: maxWaiting)
    }

    func user() async throws -> (user: UUID, session: UUID, email: String) {
        let admin = try await TestDatabase.admin()
        defer { Task { await admin.close() } }
        return try await TestDatabase.makeUser(admin)
    }

    @Test func aFixComesBackOpened() async throws {
        let owner = try await user()
        let fix = LocationFix(latitude: 52.52, longitude: 13.405, accuracyM: 12, timestampMs: Int64(Date().timeIntervalSince1970 * 1000),
                              altitudeM: 34, deviceName: "Test Phone", platform: "android")
        let outcome = try await withRelay(owner: owner.user, session: owner.session, phone: .fix(fix)) { driver in
            try await driver.locate(.init(owner: owner.user, clientID: "agent-key", timeout: .seconds(5)))
        }
        #expect(outcome == .fix(fix))
    }

    @Test(arguments: [
        (PhoneAnswer.denied(reason: .user), AgentFailure.declined),
        (.denied(reason: .noAnswer), .noAnswer),
        (.unavailable(reason: .permission), .permissionOff),
        (.unavailable(reason: .noFix), .noFix),
        (.unavailable(reason: .error), .noFix),
    ])
    func phoneAnswersMapToTheirStatuses(answer: PhoneAnswer, failure: AgentFailure) async throws {
        let owner = try await user()
        let outcome = try await withRelay(owner: owner.user, session: owner.session, phone: .answer(answer)) { driver in
            try await driver.locate(.init(owner: owner.user, clientID: "agent-key", timeout: .seconds(5)))
        }
        #expect(outcome == .failure(failure))
    }

    @Test func noDeviceIs503WithTheEmail() async throws {
        let owner = try await user()
        let outcome = try await withRelay(owner: owner.user, session: owner.session, phone: .absent) { driver in
            try await driver.locate(.init(owner: owner.user, clientID: "agent-key", email: owner.email, timeout: .seconds(1)))
        }
        #expect(outcome == .failure(.notConnected(email: owner.email)))
    }

    @Test func aDeviceThatGotThePingButNeverAnsweredIs504() async throws {
        let owner = try await user()
        let outcome = try await withRelay(owner: owner.user, session: owner.session, phone: .ignore) { driver in
            try await driver.locate(.init(owner: owner.user, clientID: "agent-key", timeout: .seconds(1)))
        }
        #expect(outcome == .failure(.phoneSilent))
    }

    @Test func theCapGives429() async throws {
        let owner = try await user()
        let outcomes = try await withRelay(owner: owner.user, session: owner.session, phone: .ignore, maxWaiting: 1) { driver in
            async let first = driver.locate(.init(owner: owner.user, clientID: "agent-key", timeout: .seconds(2)))
            _ = try await pendingRequest(of: owner.user)
            let second = try await driver.locate(.init(owner: owner.user, clientID: "agent-key", timeout: .seconds(2)))
            return [try await first, second]
        }
        #expect(outcomes == [.failure(.phoneSilent), .failure(.tooManyWaiting)])
    }

    /// A drain's wait ends when the last call ends (an hour's limit would outlast the
    /// test's own), or at its limit while a call still waits.
    @Test(.timeLimit(.minutes(1))) func untilIdleEndsWithTheLastCallOrAtItsLimit() async throws {
        let owner = try await user()
        try await withRelay(owner: owner.user, session: owner.session, phone: .ignore) { driver in
            // The call waits 5 s, not 1: on a loaded machine a 1-s call had ended before the
            // first look.
            let call = Task { try await driver.locate(.init(owner: owner.user, clientID: "agent-key", timeout: .seconds(5))) }
            _ = try await pendingRequest(of: owner.user)
            await driver.untilIdle(within: .milliseconds(10))
            #expect(await driver.waitingCount == 1, "the limit came first")
            await driver.untilIdle(within: .seconds(3600))
            #expect(await driver.waitingCount == 0)
            #expect(try await call.value == .failure(.phoneSilent))
        }
    }

    /// An agent that hangs up does not refuse: its request stays open for the person; a
    /// withdrawal (an explicit cancel) abandons it, and the row is settled as abandoned.
    @Test func aHangUpKeepsTheRequestAndAWithdrawalAbandonsIt() async throws {
        let owner = try await user()
        let admin = try await TestDatabase.admin()
        defer { Task { await admin.close() } }
        let (outcome, afterHangUp) = try await withRelay(owner: owner.user, session: owner.session, phone: .ignore) { driver in
            let task = Task { try await driver.locate(.init(owner: owner.user, clientID: "agent-key", timeout: .seconds(30))) }
            let id = try await pendingRequest(of: owner.user)
            task.cancel()
            try await Task.sleep(for: .milliseconds(300))
            let open = try await admin.query("select outcome from relay.pending_requests where id = $1", [id])
                .first?.decode(0, as: String?.self)
            #expect(await driver.withdraw(id))
            return (try await task.value, open)
        }
        #expect(afterHangUp == .some(nil), "still open after the hang-up")
        #expect(outcome == .abandoned)
        let outcomes = try await admin.query("select outcome from relay.pending_requests where owner_id = $1", [owner.user])
        #expect(try outcomes.rows.map { try $0.decode(0, as: String.self) } == ["abandoned"])
    }

    @Test func agentJSONHasTheDocumentedFields() throws {
        let fix = LocationFix(latitude: 52.52, longitude: 13.405, accuracyM: 12, timestampMs: 1_796_000_000_120,
                              speedMps: 1.5, deviceName: "Ada's iPhone", platform: "ios")
        let json = fix.agentJSON(now: Date(timeIntervalSince1970: 1_796_000_001.52), person: Person(userID: nil, name: "Ada", email: "ada@example.com"))
        let object = try #require(try JSONSerialization.jsonObject(with: Data(json.utf8)) as? [String: Any])
        #expect(object["latitude"] as? Double == 52.52 && object["accuracy_m"] as? Double == 12)
        #expect(object["captured_at"] as? String == "2026-11-30T00:53:20.120Z")
        #expect(object["age_s"] as? Double == 1.4)
        #expect((object["device"] as? [String: String]) == ["name": "Ada's iPhone", "platform": "ios"])
        #expect(object["speed_mps"] as? Double == 1.5 && object["altitude_m"] == nil)
        #expect((object["person"] as? [String: String]) == ["name": "Ada", "email": "ada@example.com"])
    }
}

/// Durable requests through Postgres: opened by one call, answered by a holder on another
/// instance, fetched by a poll; bound to their credential.
extension InstanceDriverLocateTests {
    func agent(_ owner: UUID, client: String = "durable-client") -> AgentIdentity {
        AgentIdentity(userID: owner, clientID: client, keyID: nil, keyName: nil, email: nil)
    }

    @Test func aDurableRequestIsOpenedAtOnceAndItsFixFetchedByAPoll() async throws {
        let owner = try await user()
        let fix = LocationFix(latitude: 52.52, longitude: 13.405, accuracyM: 12, timestampMs: Int64(Date().timeIntervalSince1970 * 1000),
                              deviceName: "Test Phone", platform: "android")
        let token = try RequestToken(), mine = agent(owner.user)
        let (opened, polled, stranger) = try await withRelay(owner: owner.user, session: owner.session, phone: .fix(fix)) { driver in
            let opened = try await driver.locate(.init(owner: owner.user, clientID: mine.clientID, timeout: .seconds(30),
                                                            resumable: .init(token: token, binding: .init(mine), callBound: nil)))
            let polled = try await driver.poll(token, binding: .init(mine), wait: .seconds(5), email: nil)
            let stranger = try await driver.poll(token, binding: .init(self.agent(owner.user, client: "another")), wait: .zero,
                                                      email: nil)
            return (opened, polled, stranger)
        }
        guard case .waiting = opened else { Issue.record("opened: \(opened)"); return }
        guard case .settled(let state, let outcome) = polled else { Issue.record("polled: \(polled)"); return }
        #expect(outcome == .fix(fix) && state.outcome == .location && state.sealed != nil)
        #expect(stranger == .unknown)
    }

    @Test func aCallAnswersWaitingAtItsBoundAndTheRequestStaysOpen() async throws {
        let owner = try await user()
        let token = try RequestToken(), mine = agent(owner.user)
        let (first, polled, cancelled, after) = try await withRelay(owner: owner.user, session: owner.session, phone: .ignore) { driver in
            let first = try await driver.locate(.init(owner: owner.user, clientID: mine.clientID, timeout: .seconds(30),
                                                           resumable: .init(token: token, binding: .init(mine),
                                                                            callBound: .milliseconds(500))))
            let polled = try await driver.poll(token, binding: .init(mine), wait: .milliseconds(200), email: nil)
            let cancelled = try await driver.cancel(token, binding: .init(mine), forget: false)
            let after = try await driver.poll(token, binding: .init(mine), wait: .zero, email: nil)
            return (first, polled, cancelled, after)
        }
        guard case .waiting = first, case .waiting(let state) = polled else { Issue.record("\(first) \(polled)"); return }
        #expect(state.delivered && state.outcome == nil)
        #expect(cancelled == .cancelled)
        guard case .settled(_, .abandoned) = after else { Issue.record("after cancel: \(after)"); return }
    }
}
