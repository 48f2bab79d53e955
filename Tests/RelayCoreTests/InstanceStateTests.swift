import Foundation
@testable import RelayCore
import Testing

/// The instance's state value driven by events alone — no sockets, no Postgres, a fake
/// clock — so each race the relay has met is a deterministic sequence (the end-to-end
/// versions are in PhoneRacesTests and ResyncAndDrainTests).
@Suite struct InstanceStateTests {
    final class Phone: PhoneHandle, @unchecked Sendable {
        init(user: UUID = UUID()) { super.init(user: user, sessionID: UUID(), openedAt: Date(timeIntervalSince1970: 1_800_000_000)) }
    }

    typealias State = InstanceState
    typealias Action = State.Action

    /// A state with the driver's windows, and the clock its events carry.
    struct Fixture {
        var state = State(helloBatch: 250, disconnectWindow: .milliseconds(50), maximumDisconnects: 1000,
                          deliveredMarkDelay: .milliseconds(200), maximumDelivered: 1000)
        var now = Date(timeIntervalSince1970: 1_800_000_000)

        @discardableResult
        mutating func on(_ event: State.Event) -> [Action] { state.handle(event, now: now) }

        /// Opens `phone` and says its hello; the hello's batch.
        mutating func hello(_ phone: Phone, platform: String = "ios") -> [State.Hello] {
            on(.opened(phone))
            return on(.received(phone, .hello(deviceID: UUID(), name: "Ada's phone", platform: platform, appVersion: "1")))
                .registrations
        }

        /// Registers `phones` with these statuses (ok unless said), with `pending` pings.
        @discardableResult
        mutating func result(_ batch: [State.Hello], _ statuses: [UUID: RelayStatus.Hello] = [:],
                             pending: [(owner: UUID, ping: LocateMessage)] = [], batched: Bool = true) -> [Action] {
            var all: [UUID: RelayStatus.Hello] = [:]
            for hello in batch { all[hello.handle.connection] = statuses[hello.handle.connection] ?? .ok }
            return on(.hellosRegistered(batch, .init(statuses: all, pending: pending), batched: batched))
        }

        /// A registered phone.
        mutating func registered(_ phone: Phone = Phone()) -> Phone {
            result(hello(phone))
            return phone
        }

        func ping(_ id: UUID = UUID(), in seconds: Double = 60) -> LocateMessage {
            LocateMessage(id: id, clientID: "agent", expiresMs: Int64((now.timeIntervalSince1970 + seconds) * 1000),
                          requester: nil, replyKey: Array(repeating: 7, count: 32))
        }
    }

    static let fix = PhoneMessage.PhoneReply.location(latitude: 1, longitude: 2, accuracyM: 5, timestampMs: 1,
                                                      altitudeM: nil, speedMps: nil, headingDeg: nil)

    /// A socket's whole life: awaiting hello → registering (its next messages wait) →
    /// registered (they are handled in order) → closed (its row goes in the disconnects'
    /// window); each step's actions are exactly the I/O it needs.
    @Test func aSocketsLife() {
        var fixture = Fixture()
        let phone = Phone(), ping = fixture.ping()
        fixture.on(.opened(phone))
        guard case .awaitingHello? = fixture.state.sockets[phone.connection] else { Issue.record("awaiting hello"); return }
        #expect(fixture.on(.received(phone, .log)).isEmpty, "nothing before the hello")
        let batch = fixture.on(.received(phone, .hello(deviceID: UUID(), name: "Ada", platform: "web", appVersion: "2")))
            .registrations
        #expect(batch.map(\.handle.connection) == [phone.connection], "a hello goes at once when a call slot is free")
        #expect(fixture.on(.received(phone, .answer(id: ping.id, Self.fix))).isEmpty, "queued behind the hello")
        #expect(fixture.on(.received(phone, .hello(deviceID: UUID(), name: "Again", platform: "ios", appVersion: "2"))).isEmpty)
        let registered = fixture.result(batch)
        #expect(fixture.state.registeredCount == 1)
        #expect(registered.contains { if case .sendAlwaysAllowed = $0 { true } else { false } }, "the browser phone's list")
        #expect(registered.settles.map(\.id) == [ping.id], "the queued answer is handled once registered")
        let closed = fixture.on(.closed(phone.connection))
        guard case .armWindow(.disconnects, .milliseconds(50))? = closed.first else { Issue.record("window \(closed)"); return }
        guard case .disconnect([phone.connection])? = fixture.on(.windowEnded(.disconnects)).first else {
            Issue.record("the row goes"); return
        }
        #expect(fixture.state.sockets.count == 0)
    }

    /// Hello vs ping: a ping that arrives while the user's hello is in the database (the
    /// socket is not indexed yet, and the call's pending list may have been read before
    /// the request committed) reaches the phone when the hello returns — once, even when
    /// the pending list has it too; and it is marked delivered once.
    @Test func aPingDuringTheHelloReachesThePhoneOnce() {
        var fixture = Fixture()
        let phone = Phone(), ping = fixture.ping()
        let batch = fixture.hello(phone)
        #expect(fixture.on(.locate(ping, owner: phone.user)).isEmpty, "kept, not sent: the socket is not registered")
        let actions = fixture.result(batch, pending: [(phone.user, ping)])
        #expect(actions.sent(to: phone) == [ping.phoneJSON])
        #expect(actions.contains { if case .armWindow(.deliveredMarks, _) = $0 { true } else { false } })
        guard case .markDelivered([ping.id])? = fixture.on(.windowEnded(.deliveredMarks)).first else {
            Issue.record("one mark"); return
        }
        #expect(fixture.on(.locate(ping, owner: phone.user)).isEmpty, "each id once per socket")
    }

    /// A reminder (docs/protocol.md, "Reminders") goes to every registered phone of its owner
    /// here, and to no other account's phone or socket still waiting for its hello.
    @Test func aReminderReachesEveryRegisteredPhoneOfItsOwner() {
        var fixture = Fixture()
        let user = UUID()
        let first = fixture.registered(Phone(user: user)), second = fixture.registered(Phone(user: user))
        let waiting = Phone(user: user), other = fixture.registered()
        _ = fixture.hello(waiting)
        let reminder = #"{"type":"reminder","client_id":"agent","agent_name":"Helper"}"#  // GrantReminder.phoneJSON's form
        let actions = fixture.on(.tell(reminder, owner: user))
        #expect(actions.sent(to: first) == [reminder] && actions.sent(to: second) == [reminder])
        #expect(actions.sent(to: waiting).isEmpty && actions.sent(to: other).isEmpty && actions.count == 2)
    }

    /// A reaped instance: hellos that find its row gone leave their sockets unregistered
    /// and ask for one re-registration however many there are; the re-registration says
    /// every socket's hello again (registered and unregistered), after which pings reach
    /// the unregistered ones too.
    @Test func aReapedInstanceReregistersEverySocket() {
        var fixture = Fixture()
        let old = fixture.registered(), first = Phone(), second = Phone()
        let firstBatch = fixture.hello(first), secondBatch = fixture.hello(second)
        let asked = fixture.result(firstBatch, [first.connection: .unregistered])
            + fixture.result(secondBatch, [second.connection: .unregistered])
        #expect(asked.filter { if case .requestReregistration = $0 { true } else { false } }.count == 1)
        #expect(fixture.on(.locate(fixture.ping(), owner: first.user)).isEmpty, "an unregistered socket is no phone here yet")
        let resync = fixture.on(.resync(reregister: true, maximumBatch: 2))
        let batches = resync.compactMap { action -> [State.Hello]? in
            if case .registerHellos(let batch, batched: false) = action { batch } else { nil }
        }
        #expect(batches.map(\.count) == [2, 1], "in calls of the largest batch")
        #expect(Set(batches.flatMap { $0 }.map(\.handle.connection)) == [old.connection, first.connection, second.connection])
        #expect(batches.flatMap { $0 }.allSatisfy { ($0.appVersion == nil) == ($0.handle === old) },
                "a registered socket says no app version again; one never registered says its own")
        for batch in batches { fixture.result(batch, batched: false) }
        #expect(fixture.state.registeredCount == 3)
        let ping = fixture.ping()
        #expect(fixture.on(.locate(ping, owner: first.user)).sent(to: first) == [ping.phoneJSON])
        #expect(fixture.on(.resync(reregister: false, maximumBatch: 2)).isEmpty)
        let refused = fixture.hello(Phone())
        #expect(fixture.result(refused, [refused[0].handle.connection: .unregistered])
            .contains { if case .requestReregistration = $0 { true } else { false } }, "asked again after a re-registration")
    }

    /// A stale hello: a socket that closes while its hello is in the database leaves a row
    /// the result must forget; one that closes while its hello waits for a call slot is
    /// never sent at all.
    @Test func aHelloOfAClosedSocketLeavesNoRow() {
        var fixture = Fixture()
        let inFlight = Phone(), second = Phone(), waiting = Phone()
        let firstBatch = fixture.hello(inFlight), secondBatch = fixture.hello(second)
        #expect(fixture.hello(waiting).isEmpty, "two calls in flight: the third waits")
        fixture.on(.closed(inFlight.connection))
        fixture.on(.closed(waiting.connection))
        let stale = fixture.result(firstBatch)
        #expect(stale.contains { if case .armWindow(.disconnects, _) = $0 { true } else { false } }, "the new row is forgotten")
        #expect(stale.registrations.isEmpty, "the closed waiting hello is not sent")
        guard case .disconnect([inFlight.connection])? = fixture.on(.windowEnded(.disconnects)).first else {
            Issue.record("disconnect"); return
        }
        fixture.result(secondBatch)
        #expect(fixture.state.registeredCount == 1 && fixture.state.sockets.count == 1)
    }

    /// A lost settle result: an answer the database could not take is held (never lost);
    /// the resync settles it again; once settled, the other phones that got the ping are
    /// cancelled — the same cancel a notification would bring, since the database never
    /// notifies the instance that settled.
    @Test func anAnswerWhoseSettleFailedIsHeldAndSettledAtResync() {
        var fixture = Fixture()
        let owner = UUID()
        let answering = fixture.registered(Phone(user: owner)), other = fixture.registered(Phone(user: owner))
        let ping = fixture.ping()
        #expect(fixture.on(.locate(ping, owner: owner)).sent(to: other) == [ping.phoneJSON])
        let settles = fixture.on(.received(answering, .answer(id: ping.id, Self.fix))).settles
        #expect(settles.first?.replyKey == ping.replyKey, "the key came with this socket's ping")
        #expect(fixture.on(.settled(settles[0], nil)).isEmpty)
        #expect(fixture.state.held.count == 1)
        fixture.now += 10
        let retry = fixture.on(.resync(reregister: false, maximumBatch: 100)).settles
        #expect(retry.map(\.id) == [ping.id] && retry[0].heldUntil != nil)
        let settled = fixture.on(.settled(retry[0], .settled))
        #expect(settled.sent(to: other) == [#"{"type":"cancel","id":"\#(UUIDText.lowercase(ping.id))"}"#])
        #expect(settled.sent(to: answering).isEmpty, "the answering phone needs no cancel")
        #expect(fixture.state.held.isEmpty && !fixture.state.pings.contains(ping.id))
    }

    /// A locate that comes after its request ended here — its notification behind the
    /// settle, or a resync after a Postgres crash that reads it again — is not sent again,
    /// to the phones that had it nor to one that registered since; the ended id is kept
    /// until the ping would have expired (a fault run once saw 101 pings for 100 requests).
    @Test func aLateLocateForAnEndedRequestIsNotSentAgain() {
        var fixture = Fixture()
        let owner = UUID()
        let answering = fixture.registered(Phone(user: owner)), other = fixture.registered(Phone(user: owner))
        let ping = fixture.ping(in: 30), cancelled = fixture.ping(in: 30)
        fixture.on(.locate(ping, owner: owner))
        fixture.on(.locate(cancelled, owner: owner))
        let settle = fixture.on(.received(answering, .answer(id: ping.id, Self.fix))).settles[0]
        #expect(fixture.on(.settled(settle, .settled)).sent(to: other).count == 1, "the other phone's cancel")
        #expect(fixture.on(.cancel(cancelled.id)).sent(to: answering).count == 1)
        #expect(fixture.on(.locate(ping, owner: owner)).isEmpty, "settled here: not sent again")
        #expect(fixture.on(.locate(cancelled, owner: owner)).isEmpty, "cancelled: not sent again")
        let late = fixture.registered(Phone(user: owner))
        #expect(fixture.on(.locate(ping, owner: owner)).sent(to: late).isEmpty, "nor to a phone that came since")
        #expect(fixture.state.pings.endedCount == 2)
        fixture.now += 31
        fixture.on(.resync(reregister: false, maximumBatch: 1))
        #expect(fixture.state.pings.endedCount == 0, "forgotten once the pings expired")
    }

    /// A held answer is kept through `gone` (its row may wait to be re-created after a
    /// crash) until its ping's expiry, and then forgotten; one the database refused
    /// (`forbidden`) is dropped at once.
    @Test func aHeldAnswerLastsUntilItsPingExpires() {
        var fixture = Fixture()
        let phone = fixture.registered(), ping = fixture.ping(in: 30)
        fixture.on(.locate(ping, owner: phone.user))
        let answer = fixture.on(.received(phone, .answer(id: ping.id, .denied(.user)))).settles[0]
        fixture.on(.settled(answer, .gone))
        #expect(fixture.state.held.count == 1, "gone for a ping not cancelled: held")
        fixture.now += 20
        fixture.on(.settled(fixture.on(.resync(reregister: false, maximumBatch: 1)).settles[0], .gone))
        #expect(fixture.state.held.count == 1)
        fixture.now += 11
        #expect(fixture.on(.resync(reregister: false, maximumBatch: 1)).settles.isEmpty, "past the ping's expiry")
        #expect(fixture.state.held.isEmpty)
        let stranger = fixture.on(.received(phone, .answer(id: UUID(), .denied(.user)))).settles[0]
        fixture.on(.settled(stranger, .forbidden))
        #expect(fixture.state.held.isEmpty, "not this user's request: nothing to hold")
    }

    /// An answer during the drain: the drain closes every socket 1012 "restart" (and any
    /// that opens or says hello from then on), yet an answer already sent by a phone is
    /// still settled before its close arrives.
    @Test func anAnswerDuringTheDrainIsStillSettled() {
        var fixture = Fixture()
        let phone = fixture.registered(), newcomer = Phone(), ping = fixture.ping()
        fixture.on(.opened(newcomer))
        fixture.on(.locate(ping, owner: phone.user))
        let drained = fixture.on(.drain)
        #expect(drained.closes.sorted() == [phone.connection, newcomer.connection].sorted())
        #expect(fixture.on(.received(phone, .answer(id: ping.id, Self.fix))).settles.map(\.id) == [ping.id])
        #expect(fixture.on(.received(newcomer, .hello(deviceID: UUID(), name: "n", platform: "ios", appVersion: "1")))
            .closes == [newcomer.connection])
        let late = Phone()
        #expect(fixture.on(.opened(late)).closes == [late.connection])
        #expect(fixture.state.sockets[late.connection] == nil)
    }

    /// One hello's failure stays its own: a socket whose hello was refused alone, or that
    /// was registering when the database could not be reached, is closed 1011 "try again";
    /// a registered socket stays when its re-registration could not reach the database.
    @Test func anUnreachableDatabaseClosesOnlySocketsNotRegisteredYet() {
        var fixture = Fixture()
        let registered = fixture.registered(), pending = Phone(), refused = Phone()
        let pendingBatch = fixture.hello(pending), refusedBatch = fixture.hello(refused)
        let unreachable = fixture.on(.hellosRegistered(pendingBatch, nil, batched: true))
        #expect(unreachable.closes == [pending.connection])
        let alone = fixture.on(.hellosRegistered(refusedBatch, .init(statuses: [:], failed: [refused.connection], pending: []),
                                                 batched: true))
        #expect(alone.closes == [refused.connection])
        let reregistration = fixture.on(.resync(reregister: true, maximumBatch: 10)).registrations
        #expect(fixture.on(.hellosRegistered(reregistration, nil, batched: false)).closes.isEmpty)
        #expect(fixture.state.sockets.record(registered.connection) != nil && fixture.state.sockets.count == 1)
    }

    /// A registering socket may queue only so many messages; past that it is closed 1008.
    @Test func aRegisteringSocketsQueueIsBounded() {
        var fixture = Fixture()
        let phone = Phone()
        _ = fixture.hello(phone)
        for _ in 0..<State.maximumQueuedMessages { #expect(fixture.on(.received(phone, .log)).isEmpty) }
        let overflow = fixture.on(.received(phone, .log))
        guard case .close(_, .tooManyMessages)? = overflow.first else { Issue.record("closed: \(overflow)"); return }
    }

    /// Hello statuses the database returns close the socket with the codes of docs/protocol.md,
    /// "The socket".
    @Test func refusedHellosCloseWithTheirCodes() {
        let cases: [(RelayStatus.Hello, SocketClose)] = [
            (.revoked, .revoked), (.replaced, .replaced), (.tooMany, .tooManyDevices),
            (.tooManyDevices, .tooManyDevices), (.invalid, .invalidHello), (.forbidden, .foreignDevice),
        ]
        for (status, why) in cases {
            var fixture = Fixture()
            let phone = Phone()
            let actions = fixture.result(fixture.hello(phone), [phone.connection: status])
            guard case .close(let handle, why)? = actions.first else { Issue.record("\(status): \(actions)"); continue }
            #expect(handle === phone && fixture.state.sockets.count == 0)
        }
    }

    /// Revocation and replacement: a removed device's sockets close 4000 "revoked" and
    /// their cached sessions are forgotten; a device that said hello elsewhere closes its
    /// older sockets 4000 "replaced" but not the new one; a notification of another device
    /// of the owner, or of the device under another owner, closes nothing; a token check's
    /// outcome closes, renews or only logs.
    @Test func revocationReplacementAndTokens() {
        var fixture = Fixture()
        let phone = fixture.registered()
        guard case .registered(let record)? = fixture.state.sockets[phone.connection] else { Issue.record("registered"); return }
        #expect(fixture.on(.device(record.device, owner: phone.user, revoked: false, except: phone.connection)).isEmpty,
                "the new socket stays")
        #expect(fixture.on(.device(UUID(), owner: phone.user, revoked: true, except: nil)).isEmpty, "another device of the owner")
        #expect(fixture.on(.device(record.device, owner: UUID(), revoked: true, except: nil)).isEmpty, "another owner")
        let replaced = fixture.on(.device(record.device, owner: phone.user, revoked: false, except: UUID()))
        guard case .close(_, .replaced)? = replaced.first, replaced.count == 1 else { Issue.record("\(replaced)"); return }
        let revoked = fixture.on(.revoked([phone.connection, UUID()]))
        guard case .close(_, .revoked)? = revoked.first, case .forgetSession(phone.sessionID)? = revoked.last else {
            Issue.record("\(revoked)"); return
        }
        guard case .checkToken(_, "fresh")? = fixture.on(.received(phone, .token("fresh"))).first else {
            Issue.record("token checked"); return
        }
        let until = fixture.now + 3600
        guard case .renewCredential(_, until)? = fixture.on(.tokenChecked(phone, .renewed(until))).first,
              case .close(_, .tokenExpired)? = fixture.on(.tokenChecked(phone, .expired)).first,
              case .warn("token_check_unavailable", _)? = fixture.on(.tokenChecked(phone, .unavailable)).first else {
            Issue.record("token outcomes"); return
        }
        fixture.on(.closed(phone.connection))
        #expect(fixture.on(.tokenChecked(phone, .expired)).isEmpty, "a closed socket is left alone")
    }
}

extension Array where Element == InstanceState.Action {
    /// The hellos these actions register through the batcher.
    var registrations: [InstanceState.Hello] {
        flatMap { action -> [InstanceState.Hello] in
            if case .registerHellos(let batch, batched: true) = action { batch } else { [] }
        }
    }

    /// The answers these actions settle.
    var settles: [InstanceState.Answer] {
        compactMap { action in if case .settle(let answer) = action { answer } else { nil } }
    }

    /// The texts sent to `phone`.
    func sent(to phone: InstanceStateTests.Phone) -> [String] {
        compactMap { action in if case .send(let handle, let text) = action, handle === phone { text } else { nil } }
    }

    /// The connections closed.
    var closes: [UUID] {
        compactMap { action in if case .close(let handle, _) = action { handle.connection } else { nil } }
    }
}
