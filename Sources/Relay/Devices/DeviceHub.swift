import Foundation

/// The holder side of the device protocol on one instance: which phones are connected
/// here, pings out, answers in (sealed to the waiter), cancels, replacement and revocation.
public actor DeviceHub {
    /// Close code for a replaced or revoked device (the app must not reconnect by itself).
    public static let replacedCode: UInt16 = 4000

    private let instance: String
    private let database: RelayDatabase
    private var sessions: [UUID: DeviceSession] = [:]            // by connection
    private var devices: [UUID: (device: UUID, name: String, platform: String)] = [:]  // connection → device
    private var pinged: [UUID: Set<UUID>] = [:]                  // request → connections that got it

    /// Creates the hub of relay instance `instance`.
    public init(instance: String, database: RelayDatabase) {
        self.instance = instance
        self.database = database
    }

    /// Phones connected here (after hello).
    public var connectedCount: Int { devices.count }

    /// A new socket for a verified phone; hand the result to `HTTPResponse.webSocket(delegate:)`.
    nonisolated func session(for phone: PhoneIdentity) -> DeviceSession {
        DeviceSession(phone: phone, hub: self)
    }

    // MARK: From the phones

    func handle(_ event: DeviceSession.Event, from session: DeviceSession) async {
        switch event {
        case .closed:
            sessions[session.connection] = nil
            devices[session.connection] = nil
            _ = try? await database.deviceDisconnect(session.connection)
        case .message(let text):
            switch PhoneMessage.parse(text) {
            case .hello(let device, let name, let platform, let version):
                await hello(session, device: device, name: name, platform: platform, version: version)
            case .answer(let id, let reply):
                await answer(session, id: id, reply: reply)
            case .log, .unknown, nil:
                break
            }
        }
    }

    private func hello(_ session: DeviceSession, device: UUID, name: String, platform: String, version: String) async {
        guard devices[session.connection] == nil else { return }  // one hello per socket
        let result: RelayDatabase.Hello
        do {
            result = try await database.deviceHello(instance: instance, connection: session.connection, user: session.phone.userID,
                                                    device: device, name: name, platform: platform, appVersion: version)
        } catch {
            session.close(code: 1011, reason: "try again")
            return
        }
        switch result.status {
        case "ok":
            sessions[session.connection] = session
            devices[session.connection] = (device, name, platform)
            for ping in result.pending { await send(ping, to: session) }
        case "revoked":
            session.close(code: Self.replacedCode, reason: "revoked")
        default:
            session.close(code: 1008, reason: "device belongs to another user")
        }
    }

    private func answer(_ session: DeviceSession, id: UUID, reply: PhoneMessage.PhoneReply) async {
        guard let device = devices[session.connection] else { return }  // no hello yet
        // The answering phone needs no cancel for its own answer; the others get one.
        pinged[id]?.remove(session.connection)
        _ = try? await AnswerSettler(database: database).settle(id: id, user: session.phone.userID, device: device.device,
                                                                 deviceName: device.name, platform: device.platform, reply: reply)
    }

    // MARK: From the bus

    /// A `whereabot_locate` notification: ping every phone of the owner connected here.
    public func locate(_ ping: LocateMessage, owner: UUID) async {
        for session in sessions.values where session.phone.userID == owner && devices[session.connection] != nil {
            await send(ping, to: session)
        }
    }

    /// A `whereabot_cancel` notification: tell every phone that got the ping.
    public func cancel(request: UUID) {
        for connection in pinged.removeValue(forKey: request) ?? [] {
            sessions[connection]?.send(#"{"type":"cancel","id":"\#(request.uuidString.lowercased())"}"#)
        }
    }

    /// A `whereabot_device` notification: close older sockets of a device that said hello
    /// elsewhere (4000 "replaced"), or every socket of a revoked device (4000 "revoked").
    public func deviceEvent(device: UUID, event: String, connection: UUID?) {
        for (id, known) in devices where known.device == device && id != connection {
            sessions[id]?.close(code: Self.replacedCode, reason: event == "revoked" ? "revoked" : "replaced")
        }
    }

    private func send(_ ping: LocateMessage, to session: DeviceSession) async {
        guard !(pinged[ping.id]?.contains(session.connection) ?? false) else { return }  // each id once
        pinged[ping.id, default: []].insert(session.connection)
        guard let data = try? JSONEncoder().encode(ping) else { return }
        session.send(String(decoding: data, as: UTF8.self))
        _ = try? await database.markDelivered(ping.id)
    }
}
