import Foundation

/// Everything one instance knows about its phones, as one value driven by events: every
/// socket in the state its life has reached (`SocketTable`), every ping out
/// (`PingLedger`), the pings kept for hellos in flight (`HellosInFlight`), answers the
/// database could not take yet, and the three batched calls (`CallBatcher`).
///
/// `handle(_:now:)` takes one `Event` — a socket's frame or close, a notification, a timer
/// firing, *or one of this instance's own database results* — and returns the `Action`s to
/// perform (send, close, call the database, arm a timer, ask for a re-registration).
/// Because a result is an event, "the database does not notify its caller" is written once
/// here: a request settled by this instance cancels its other pings in the same place a
/// notification's cancel does. No I/O, no clock of its own (`now` comes with each event):
/// `InstanceDriver` performs the actions on the loop, and the tests drive the value directly,
/// each race the relay has met as a deterministic sequence of events.
///
/// Its parts are internal only so that the transitions can live in their own file
/// (`InstanceState+Transitions.swift`); nothing outside this folder changes them.
package struct InstanceState {
    /// The sockets it keeps (the driver's are `DeviceSession`s).
    package typealias Handle = PhoneHandle
    typealias Socket = SocketTable.Socket
    package typealias Hello = SocketTable.Hello
    package typealias Record = SocketTable.Record

    /// Messages a registering socket may send before its hello is answered (docs/protocol.md, "The socket").
    package static var maximumQueuedMessages: Int { 64 }
    /// How long an answer to a ping this instance never sent is held (longer than any request).
    static var heldAnswerFallbackLifetime: TimeInterval { 130 }

    var sockets = SocketTable()
    var pings = PingLedger()
    var hellosInFlight = HellosInFlight()
    /// Answers the database could not take yet, by request.
    package internal(set) var held: [UUID: Answer] = [:]
    var hellos: CallBatcher<Hello>
    var disconnects: CallBatcher<UUID>
    var delivered: CallBatcher<UUID>
    /// Whether a re-registration was asked for since the last one (a storm of refused
    /// hellos asks once).
    var reregistrationRequested = false
    /// Whether the instance is draining: its sockets are closed 1012, and new hellos too.
    var draining = false

    /// A state with the driver's batch windows and sizes.
    package init(helloBatch: Int, disconnectWindow: Duration, maximumDisconnects: Int, deliveredMarkDelay: Duration,
         maximumDelivered: Int) {
        hellos = CallBatcher(window: .zero, maximumBatch: helloBatch, maximumInFlight: 2)
        disconnects = CallBatcher(window: disconnectWindow, maximumBatch: maximumDisconnects)
        delivered = CallBatcher(window: deliveredMarkDelay, maximumBatch: maximumDelivered)
    }

    /// Registered sockets.
    package var registeredCount: Int { sockets.registeredCount }

    /// Handles one event; the actions to perform, in order.
    mutating func handle(_ event: Event, now: Date) -> [Action] {
        var actions: [Action] = []
        handle(event, now: now, into: &actions)
        return actions
    }

    /// Handles one event, appending the actions to perform, in order, to `actions` (an
    /// executor's reused buffer: no array is made per event).
    mutating func handle(_ event: Event, now: Date, into actions: inout [Action]) {
        switch event {
        case .opened(let handle):
            if draining {
                actions.append(.close(handle, .restart))
            } else {
                sockets[handle.connection] = .awaitingHello(handle)
            }
        case .received(let handle, let message):
            received(message, from: handle, now: now, into: &actions)
        case .closed(let connection):
            closed(connection, into: &actions)
        case .hellosRegistered(let batch, let result, let batched):
            registered(batch, result, now: now, into: &actions)
            if batched { batcher(.hellos, .sent, into: &actions) }
        case .settled(let answer, let status):
            settled(answer, status, now: now, into: &actions)
        case .tokenChecked(let handle, let check):
            guard sockets[handle.connection] != nil else { break }
            switch check {
            case .renewed(let expiry): actions.append(.renewCredential(handle, until: expiry))
            case .expired: actions.append(.close(handle, .tokenExpired))
            case .revoked: actions.append(.close(handle, .revoked))
            case .unavailable: actions.append(.warn("token_check_unavailable", connection: handle.connection))
            }
        case .locate(let ping, let owner):
            hellosInFlight.keep(ping, for: owner)
            for connection in sockets.connections(ofUser: owner) ?? .many([]) {
                if let record = sockets.record(connection) { send(ping, to: record.handle, into: &actions) }
            }
        case .cancel(let request):
            cancel(request, into: &actions)
        case .tell(let text, let owner):
            for connection in sockets.connections(ofUser: owner) ?? .many([]) {
                if let record = sockets.record(connection) { actions.append(.send(record.handle, text)) }
            }
        case .device(let device, let owner, let revoked, let except):
            // Among the owner's sockets: a device is its owner's alone (relay.device_hellos
            // refuses another user's), and the table keeps no index by device.
            for connection in sockets.connections(ofUser: owner) ?? .many([]) where connection != except {
                guard let record = sockets.record(connection), record.device == device else { continue }
                let handle = record.handle
                actions.append(.close(handle, revoked ? .revoked : .replaced))
                // A removed device revokes its session: no cached "alive" may outlast that here.
                if revoked { actions.append(.forgetSession(handle.sessionID)) }
            }
        case .revoked(let connections):
            for connection in connections {
                guard let handle = sockets.record(connection)?.handle else { continue }
                actions.append(.close(handle, .revoked))
                actions.append(.forgetSession(handle.sessionID))
            }
        case .windowEnded(let call):
            batcher(call, .windowEnded, into: &actions)
        case .batchSent(let call):
            batcher(call, .sent, into: &actions)
        case .resync(let reregister, let maximumBatch):
            resync(reregister: reregister, maximumBatch: maximumBatch, now: now, into: &actions)
        case .drain:
            draining = true
            for (_, socket) in sockets.all { actions.append(.close(socket.handle, .restart)) }
        }
    }
}
