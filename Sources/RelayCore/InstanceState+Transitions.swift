import Foundation

/// The transitions behind `InstanceState.handle(_:now:)`.
extension InstanceState {
    mutating func received(_ message: PhoneMessage, from handle: Handle, now: Date, into actions: inout [Action]) {
        let connection = handle.connection
        switch sockets[connection] {
        case nil:
            return  // closed meanwhile
        case .awaitingHello:
            guard case .hello(let device, let name, let platform, let version) = message else { return }  // hello first
            let hello = Hello(handle: handle, device: device, name: name, platform: .init(platform), appVersion: version)
            if draining {
                actions.append(.close(handle, .restart))
                return
            }
            sockets[connection] = .registering(hello, queued: [])
            hellosInFlight.begin(handle.user)
            apply(hellos.add(hello), into: &actions)
        case .registering(let hello, var queued):
            if case .hello = message { return }  // one hello per socket
            guard queued.count < Self.maximumQueuedMessages else {
                actions.append(.close(handle, .tooManyMessages))
                return
            }
            queued.append(message)
            sockets[connection] = .registering(hello, queued: queued)
        case .unregistered:
            return  // it registers at the re-registration; until then it is not a phone here
        case .registered(let record):
            switch message {
            case .hello, .unknown:
                return
            case .account(let request):
                actions.append(.account(handle, device: record.device, request))
            case .answer(let id, let reply):
                // The answering phone needs no cancel for its own answer; the key came with
                // this socket's own ping (for any other id the driver asks the database).
                let key = pings.answered(id, by: connection)
                actions.append(.settle(Answer(id: id, record: record, reply: reply, replyKey: key)))
            case .token(let token):
                actions.append(.checkToken(handle, token))
            case .log:
                actions.append(.info("phone_log", connection: connection))
            }
        }
    }

    mutating func closed(_ connection: UUID, into actions: inout [Action]) {
        guard let socket = sockets[connection] else { return }
        sockets[connection] = nil
        // Only a registered socket has a row to remove (a hello in flight removes its own).
        if case .registered = socket { apply(disconnects.add(connection), .disconnects, into: &actions) }
    }

    /// A hello call came back: each socket's status is acted on.
    mutating func registered(_ batch: [Hello], _ result: RelayRows.HelloBatch?, now: Date, into actions: inout [Action]) {
        var pending: [UUID: [LocateMessage]] = [:]
        for (owner, ping) in result?.pending ?? [] { pending[owner, default: []].append(ping) }
        for hello in batch {
            let handle = hello.handle, connection = handle.connection
            let kept = hellosInFlight.end(handle.user)
            let socket = sockets[connection]
            var queued: [PhoneMessage] = []
            if case .registering(_, let waiting)? = socket { queued = waiting }
            let wasRegistered: Bool = if case .registered? = socket { true } else { false }
            if result?.failed.contains(connection) == true {
                // This hello alone was refused (a server error): the phone tries again.
                refuse(connection, handle, .tryAgain, into: &actions)
                continue
            }
            guard let result, let status = result.statuses[connection] else {
                // Unreachable: a socket not registered yet tries again elsewhere; a
                // registered one stays (the next re-registration retries).
                if socket != nil, !wasRegistered {
                    refuse(connection, handle, .tryAgain, into: &actions)
                }
                continue
            }
            guard socket != nil else {
                // Closed while the hello ran: forget the row just made.
                if status == .ok { apply(disconnects.add(connection), .disconnects, into: &actions) }
                continue
            }
            switch status {
            case .ok:
                sockets[connection] = .registered(Record(handle: handle, device: hello.device, platform: hello.platform,
                                                         name: hello.name))
                for ping in (pending[handle.user] ?? []) + kept { send(ping, to: handle, into: &actions) }
                // The browser phone keeps its always-allowed list from the relay
                // (docs/protocol.md, "Account messages"),
                // sent after its own hello (a re-registration carries no app version).
                if hello.platform == .web, hello.appVersion != nil { actions.append(.sendAlwaysAllowed(handle)) }
                for message in queued { received(message, from: handle, now: now, into: &actions) }
            case .unregistered:
                // Said again at the re-registration (a registered socket is in it anyway).
                if !wasRegistered { sockets[connection] = .unregistered(hello) }
                if !reregistrationRequested {
                    reregistrationRequested = true
                    actions.append(.requestReregistration)
                }
            case .revoked:
                refuse(connection, handle, .revoked, into: &actions)
            case .replaced:
                refuse(connection, handle, .replaced, into: &actions)
            case .tooMany, .tooManyDevices:
                refuse(connection, handle, .tooManyDevices, into: &actions)
            case .invalid:
                refuse(connection, handle, .invalidHello, into: &actions)
            case .forbidden:
                refuse(connection, handle, .foreignDevice, into: &actions)
            }
        }
    }

    /// A refused socket is closed; a registered one keeps its row until its close removes it.
    private mutating func refuse(_ connection: UUID, _ handle: Handle, _ why: SocketClose, into actions: inout [Action]) {
        if case .registered? = sockets[connection] {} else { sockets[connection] = nil }
        actions.append(.close(handle, why))
    }

    /// A settle came back. Settled: the other phones that got the ping are cancelled (the
    /// database notifies every instance but this one). An answer is held until the
    /// database takes it: after an error, and after `gone` for a ping that was not
    /// cancelled (its row may be waiting to be re-created after a crash; the cancel that
    /// follows a settle by another phone drops it). A held answer retried at a resync is
    /// dropped once the database said anything but `gone`.
    mutating func settled(_ answer: Answer, _ status: RelayStatus.Settle?, now: Date, into actions: inout [Action]) {
        if status == .settled { cancel(answer.id, into: &actions) }
        if let heldUntil = answer.heldUntil {
            if status != nil, status != .gone { held[answer.id] = nil }
            else if heldUntil <= now { held[answer.id] = nil }
            return
        }
        if status == nil || (status == .gone && pings.contains(answer.id)) {
            var kept = answer
            kept.heldUntil = pings.expiry(of: answer.id) ?? now.addingTimeInterval(Self.heldAnswerFallbackLifetime)
            held[answer.id] = kept
        }
    }

    mutating func cancel(_ request: UUID, into actions: inout [Action]) {
        held[request] = nil
        for connection in pings.end(request) {
            guard let handle = sockets[connection]?.handle else { continue }
            actions.append(.send(handle, #"{"type":"cancel","id":"\#(UUIDText.lowercase(request))"}"#))
        }
    }

    mutating func resync(reregister: Bool, maximumBatch: Int, now: Date, into actions: inout [Action]) {
        pings.forgetExpired(now: now)
        held = held.filter { ($0.value.heldUntil ?? now) > now }
        if reregister {
            reregistrationRequested = false
            var all: [Hello] = []
            for (_, socket) in sockets.all {
                switch socket {
                case .registered(let record): all.append(record.hello)
                case .unregistered(let hello): all.append(hello)
                case .awaitingHello, .registering: break
                }
            }
            for batch in all.chunks(of: max(1, maximumBatch)) {
                for hello in batch { hellosInFlight.begin(hello.handle.user) }
                actions.append(.registerHellos(batch, batched: false))
            }
        }
        for (_, answer) in held { actions.append(.settle(answer)) }
    }

    mutating func send(_ ping: LocateMessage, to handle: Handle, into actions: inout [Action]) {
        let sent = pings.send(ping, to: handle.connection)
        guard sent.send else { return }  // each id once per socket
        actions.append(.send(handle, ping.phoneJSON))
        if sent.firstForRequest { apply(delivered.add(ping.id), .deliveredMarks, into: &actions) }
    }

    // MARK: Batchers

    enum BatchEvent {
        case windowEnded, sent
    }

    mutating func batcher(_ call: Call, _ event: BatchEvent, into actions: inout [Action]) {
        switch (call, event) {
        case (.hellos, .windowEnded): apply(hellos.windowEnded(), into: &actions)
        case (.hellos, .sent): apply(hellos.sent(), into: &actions)
        case (.disconnects, .windowEnded): apply(disconnects.windowEnded(), .disconnects, into: &actions)
        case (.disconnects, .sent): apply(disconnects.sent(), .disconnects, into: &actions)
        case (.deliveredMarks, .windowEnded): apply(delivered.windowEnded(), .deliveredMarks, into: &actions)
        case (.deliveredMarks, .sent): apply(delivered.sent(), .deliveredMarks, into: &actions)
        }
    }

    /// The hello batcher's actions: a batch goes without the sockets that closed meanwhile
    /// (their pings kept for the hello are dropped with them); an empty one counts as sent.
    private mutating func apply(_ batched: [CallBatcher<Hello>.Action], into actions: inout [Action]) {
        for action in batched {
            switch action {
            case .armTimer(let delay): actions.append(.armWindow(.hellos, delay))
            case .send(let batch):
                var live: [Hello] = []
                for hello in batch {
                    if case .registering? = sockets[hello.handle.connection] { live.append(hello) }
                    else { _ = hellosInFlight.end(hello.handle.user) }
                }
                if live.isEmpty { apply(hellos.sent(), into: &actions) } else { actions.append(.registerHellos(live, batched: true)) }
            }
        }
    }

    private mutating func apply(_ batched: [CallBatcher<UUID>.Action], _ call: Call, into actions: inout [Action]) {
        for action in batched {
            switch action {
            case .armTimer(let delay): actions.append(.armWindow(call, delay))
            case .send(let batch) where call == .deliveredMarks:
                // Pings answered or cancelled meanwhile need no mark.
                let waiting = batch.filter(pings.contains)
                if waiting.isEmpty { apply(delivered.sent(), call, into: &actions) } else { actions.append(.markDelivered(waiting)) }
            case .send(let batch):
                actions.append(.disconnect(batch))
            }
        }
    }
}
