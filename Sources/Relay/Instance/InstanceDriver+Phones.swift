import Foundation
import HTTPServer
import PGBus
import RelayCore

/// The phones' side of the driver, as the executor of `InstanceState`: every event — a
/// socket's message or close, a notification, a batch window's timer, the result of one of
/// its own database calls — goes through the value, and the driver performs the actions it
/// returns (send, close, call the database, arm a timer).
///
/// Hellos, disconnects and delivered marks of many sockets go to the database as one
/// set-based call each (a reconnect storm costs O(batches)). Nothing a phone said is lost
/// to a database outage: an answer that cannot be settled is held and settled again at
/// every resync until its request expires.
///
/// A socket is only as good as its credential (docs/protocol.md, "The socket"): its own deadline (its WebSocket's
/// close deadline; no sweep visits every socket) closes it when it said no hello within
/// `helloTimeout` (1008) and when its token expired without a fresh `token` message (4001
/// "token_expired"); `closeRevoked()` at every heartbeat closes sockets whose session was
/// signed out or revoked or whose device was removed (4000).
extension InstanceDriver {
    /// A new socket for a verified phone holding its place in the waiting room (`ticket`),
    /// for `HTTPResponse.webSocket(delegate:)`.
    nonisolated func session(for phone: PhoneIdentity, waiting ticket: HelloWaitingRoom.Ticket) -> DeviceSession {
        return DeviceSession(phone: phone, driver: self, waiting: ticket)
    }

    // MARK: Events

    /// A socket's event, in the socket's order (its next one comes after this returns).
    func handle(_ event: DeviceSession.Event, from session: DeviceSession) async {
        while replaying[session.connection] != nil {
            await withCheckedContinuation { replaying[session.connection]?.append($0) }
        }
        let stateEvent: State.Event
        switch event {
        case .opened:
            stateEvent = .opened(session)
        case .closed:
            // A socket that never said hello costs its address, as a failed credential does.
            if let address = session.leaveWaitingRoom() { await authenticator.recordFailure(client: address) }
            stateEvent = .closed(session.connection)
        case .message(let text):
            guard let message = PhoneMessage.parse(text) else { return }
            if case .hello = message { session.leaveWaitingRoom() }
            stateEvent = .received(session, message)
        }
        await handle(.phones(stateEvent))
    }

    /// A new request for `owner` (its notification, or the waiter here): ping every phone
    /// of the owner connected here, and keep it for a hello of theirs still in flight.
    func ping(_ ping: LocateMessage, owner: UUID) async {
        await handle(.phones(.locate(ping, owner: owner)))
    }

    /// A request ended (its cancel notification, or an answer settled here): tell every
    /// phone that got the ping.
    func cancel(request: UUID) async {
        await handle(.phones(.cancel(request)))
    }

    /// Sends `text` to every phone of `owner` connected here that said hello (a reminder).
    func tell(owner: UUID, _ text: String) async {
        await handle(.phones(.tell(text, owner: owner)))
    }

    /// A `whereabot_device` notification: close older sockets of a device that said hello
    /// elsewhere (4000 "replaced"), or every socket of a revoked device (4000 "revoked").
    func deviceEvent(device: UUID, owner: UUID, event: DeviceEvent, connection: UUID?) async {
        await handle(.phones(.device(device, owner: owner, revoked: event == .revoked, except: connection)))
    }

    /// Closes this instance's sockets whose session was signed out or revoked, or whose
    /// device was removed (4000 "revoked"); called at every heartbeat.
    func closeRevoked() async throws {
        await handle(.phones(.revoked(try await database.revokedConnections(on: instance))))
    }

    /// Catches up with the tables: re-registers every socket when `reregister` (after a
    /// reconnect, or when this instance's row was gone), in calls of up to
    /// `RelayDatabase.maxHellosPerBatch`; sends pings whose notification was missed,
    /// settles held answers, and forgets expired pings.
    func resyncPhones(reregister: Bool) async throws {
        resyncTally = ResyncTally()
        await handle(.phones(.resync(reregister: reregister, maximumBatch: RelayDatabase.maxHellosPerBatch)))
        guard resyncTally.reachable else { throw PhoneResyncError.reregistrationFailed }
        for (owner, ping) in try await database.pendingLocates(on: instance) { await handle(.phones(.locate(ping, owner: owner))) }
        // `gone` may mean the waiter has not re-created the row after a crash yet: kept
        // until the request expires (a cancel drops it sooner).
        guard resyncTally.settleFailures == 0 else { throw PhoneResyncError.settleFailed }
    }

    /// A resync's re-registration of `batch` (its `registerHellos(_, batched: false)`),
    /// one call after the other: after a failed call the rest are reported unreachable too
    /// (their sockets not registered yet close "try again"; registered ones are tried at the
    /// next beat).
    func reregister(_ batch: [State.Hello]) async {
        let result = resyncTally.reachable ? await helloStatuses(batch) : nil
        if result == nil { resyncTally.reachable = false }
        await handle(.phones(.hellosRegistered(batch, result, batched: false)))
    }

    /// Drain: forgets every socket of this instance in one call, then closes them 1012
    /// "restart" (the phones reconnect to another instance); sockets opening from now on
    /// are closed too.
    func closeAll() async {
        do { try await database.drainConnections(on: instance) } catch {
            logger.failure("drain_connections_failed", error)  // each socket's close forgets it then
        }
        await handle(.phones(.drain))
    }

    // MARK: What the actions need

    /// A `token` message: a fresh access token for the same user and session, without
    /// client_id, keeps the socket open past the old token's expiry; anything else closes
    /// it 4001 "token_expired".
    func check(_ token: String, of session: DeviceSession) async -> State.TokenCheck {
        do {
            let fresh = try await authenticator.phone("Bearer " + token)
            guard fresh.userID == session.user, fresh.sessionID == session.sessionID else { return .expired }
            return .renewed(fresh.expiresAt)
        } catch .unavailable {
            return .unavailable
        } catch .deviceRemoved, .revoked {
            return .revoked
        } catch {
            return .expired
        }
    }

    /// `relay.device_hellos` of `batch`, with one element's failure kept to itself: when
    /// the database refuses the call (a server error, such as a device row inserted past the
    /// cap through the API at the same moment), the batch is halved until the hello that
    /// fails stands alone, and only that socket is `failed` (1011 "try again").
    /// Nil when the database could not be reached at all.
    func helloStatuses(_ batch: [State.Hello]) async -> RelayDatabase.HelloBatch? {
        do {
            return try await database.deviceHellos(instance: instance, batch.map(\.database))
        } catch let error as PGError where error.code == .server {
            guard batch.count > 1 else {
                logger.failure("device_hello_refused", error, ["connection": batch[0].handle.connection.uuidString])
                return RelayDatabase.HelloBatch(statuses: [:], failed: [batch[0].handle.connection], pending: [])
            }
            logger.warning("device_hello_batch_split", ["sockets": String(batch.count), "sqlstate": error.sqlState ?? ""])
            var statuses: [UUID: RelayStatus.Hello] = [:]
            var failed = Set<UUID>()
            var pending: [(owner: UUID, ping: LocateMessage)] = []
            var sent = Set<UUID>()  // a user's waiting pings come back from each half that holds the user
            for half in [Array(batch[..<(batch.count / 2)]), Array(batch[(batch.count / 2)...])] {
                guard let part = await helloStatuses(half) else {
                    failed.formUnion(half.map(\.handle.connection))
                    continue
                }
                statuses.merge(part.statuses) { first, _ in first }
                failed.formUnion(part.failed)
                for entry in part.pending where sent.insert(entry.ping.id).inserted { pending.append(entry) }
            }
            return RelayDatabase.HelloBatch(statuses: statuses, failed: failed, pending: pending)
        } catch {
            logger.failure("device_hello_failed", error, ["sockets": String(batch.count)])
            return nil
        }
    }
}

/// Why the phones' resync stopped (the maintenance retries at the next beat).
enum PhoneResyncError: Error {
    case reregistrationFailed
    case settleFailed
}
