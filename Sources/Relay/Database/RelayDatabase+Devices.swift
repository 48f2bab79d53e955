import Foundation
import JSON
import PGBus
import RelayCore

extension RelayDatabase {
    /// One socket's hello, as `relay.device_hellos` takes it.
    public typealias SocketHello = RelayRows.SocketHello

    /// What one batch of hellos did.
    public typealias HelloBatch = RelayRows.HelloBatch

    /// Hellos one `deviceHellos` call takes (the function's own limit).
    public static let maxHellosPerBatch = 1000

    /// Registers up to `maxHellosPerBatch` sockets in one call, with the pings waiting for their users.
    public func deviceHellos(instance: String, _ hellos: [SocketHello]) async throws -> HelloBatch {
        precondition((1...Self.maxHellosPerBatch).contains(hellos.count), "1 to \(Self.maxHellosPerBatch) hellos per batch")
        let argument = "[" + hellos.map(\.json).joined(separator: ",") + "]"
        let json = try await pool.send("select relay.device_hellos($1, $2::jsonb, $3)",
                                        [instance, argument, Self.maxSocketsPerUser]).scalar(PGJSON.self).parsed()
        guard case .array(let results)? = json["results"], case .array(let pending)? = json["pending"] else {
            throw Self.malformed("device_hellos")
        }
        var statuses: [UUID: RelayStatus.Hello] = [:]
        for result in results {
            guard let connection = result["connection"]?.uuid else { throw Self.malformed("device_hellos") }
            statuses[connection] = try Self.status(result, "status", from: "device_hellos")
        }
        return HelloBatch(statuses: statuses, pending: try pending.map {
            guard let owner = $0["owner"]?.uuid, let message = $0["message"], let ping = LocateMessage(json: message) else {
                throw Self.malformed("device_hellos")
            }
            return (owner, ping)
        })
    }

    /// Device sockets one user may hold across all instances.
    public static let maxSocketsPerUser = 20

    /// Sockets one `deviceDisconnects` call forgets (the function's own limit).
    public static let maxDisconnectsPerBatch = 10_000

    /// Forgets closed sockets (those already replaced or reaped are skipped); returns how
    /// many were registered.
    @discardableResult
    public func deviceDisconnects(_ connections: [UUID]) async throws -> Int {
        precondition(connections.count <= Self.maxDisconnectsPerBatch, "at most \(Self.maxDisconnectsPerBatch) per call")
        return try await pool.send("select relay.device_disconnects($1)", [connections]).scalar(Int.self)
    }

    /// A draining instance forgets all of its sockets at once (before it closes them).
    @discardableResult
    public func drainConnections(on instance: String) async throws -> Int {
        try await pool.send("select relay.drain_connections($1)", [instance]).scalar(Int.self)
    }
}

extension RelayRows.SocketHello {
    /// The element of `relay.device_hellos`' argument.
    var json: String {
        var object = JSONText()
        object.string("connection", UUIDText.lowercase(connection))
        object.string("user", UUIDText.lowercase(user))
        object.string("session", UUIDText.lowercase(session))
        object.string("device", UUIDText.lowercase(device))
        object.string("name", name)
        object.string("platform", platform)
        object.string("app_version", appVersion)
        object.string("opened_at", JSONText.timestamp(milliseconds: Int64((openedAt.timeIntervalSince1970 * 1000).rounded(.down))))
        return object.object
    }
}
