import Foundation

/// Every phone socket of this instance, one small value per socket keyed by its
/// connection, in the state its life has reached (`Socket`), and an index of the
/// registered ones by user (for pings, and for a device's replacement or revocation: a
/// device is found among its owner's sockets, which its notification names) that holds a
/// single connection inline — the common case of one phone per user allocates no set.
///
/// No I/O: `InstanceState` owns one; tests drive it directly. `Handle` is what actions send
/// through (a `DeviceSession`; anything in tests).
package struct SocketTable {
    /// The sockets it keeps (the driver's are `DeviceSession`s).
    package typealias Handle = PhoneHandle

    /// A socket's life: awaiting hello → registering → registered, or refused (closed by an
    /// action, then absent) — or unregistered, when the instance's row was gone, until the
    /// re-registration. A closed socket is absent.
    enum Socket {
        /// Open, no hello yet (its WebSocket closes it 1008 at the hello timeout).
        case awaitingHello(Handle)
        /// Its hello waits for or is inside a `relay.device_hellos` call; what it sends
        /// meanwhile waits here, in order, and is handled once it is registered.
        indirect case registering(Hello, queued: [PhoneMessage])
        /// Registered: pings reach it.
        case registered(Record)
        /// Its hello found this instance's row gone: said again at the re-registration.
        indirect case unregistered(Hello)

        /// What messages to the socket go through.
        var handle: Handle {
            switch self {
            case .awaitingHello(let handle): handle
            case .registering(let hello, _), .unregistered(let hello): hello.handle
            case .registered(let record): record.handle
            }
        }
    }

    /// A hello to register: the socket and what its phone said (no app version at
    /// re-registration: the relay keeps none, and the database leaves it unchanged).
    package struct Hello {
        package let handle: Handle
        package let device: UUID
        package let name: String
        package let platform: Platform
        package let appVersion: String?

        /// The hello as `relay.device_hellos` takes it.
        package var database: RelayRows.SocketHello {
            .init(connection: handle.connection, user: handle.user, session: handle.sessionID, device: device,
                  name: name, platform: platform.text, appVersion: appVersion, openedAt: handle.openedAt)
        }
    }

    /// What the relay keeps of a phone that said hello (no email, no app version).
    package struct Record {
        /// Where messages to the phone go (it knows the phone's verified user).
        package let handle: Handle
        /// The device it said it is.
        package let device: UUID
        /// Its platform, as one byte.
        package let platform: Platform
        /// Its name as it said it (for the agent's answer).
        package let name: String

        /// The hello that registers it again (re-registration).
        package var hello: Hello { Hello(handle: handle, device: device, name: name, platform: platform, appVersion: nil) }
    }

    /// The platforms a phone may declare (`PhoneMessage.platforms`).
    package enum Platform: UInt8, Sendable {
        case ios, android, desktop, web

        /// The platform named `text`; web for anything else (as `PhoneMessage` reads hellos).
        package init(_ text: String) {
            switch text {
            case "ios": self = .ios
            case "android": self = .android
            case "desktop": self = .desktop
            default: self = .web
            }
        }

        /// Its name on the wire and in the database.
        package var text: String {
            switch self {
            case .ios: "ios"
            case .android: "android"
            case .desktop: "desktop"
            case .web: "web"
            }
        }
    }

    /// One connection inline, or a set of them.
    enum Connections: Sequence {
        case one(UUID)
        case many(Set<UUID>)

        func inserting(_ connection: UUID) -> Connections {
            switch self {
            case .one(connection): return self
            case .one(let other): return Connections.many([other, connection])
            case .many(var set):
                set.insert(connection)
                return Connections.many(set)
            }
        }

        /// Without `connection`; nil when none is left.
        func removing(_ connection: UUID) -> Connections? {
            switch self {
            case .one(connection): return nil
            case .one: return self
            case .many(var set):
                set.remove(connection)
                if set.count == 1, let last = set.first { return .one(last) }
                return set.isEmpty ? nil : .many(set)
            }
        }

        /// Walks the connections without allocating (a type-erased iterator would box its
        /// state on the heap at every walk: each ping walks its owner's sockets).
        func makeIterator() -> Iterator {
            switch self {
            case .one(let connection): Iterator.one(connection)
            case .many(let set): Iterator.many(set.makeIterator())
            }
        }

        /// The iterator of `Connections`.
        enum Iterator: IteratorProtocol {
            case one(UUID?)
            case many(Set<UUID>.Iterator)

            mutating func next() -> UUID? {
                switch self {
                case .one(let connection):
                    self = .one(nil)
                    return connection
                case .many(var iterator):
                    let next = iterator.next()
                    self = .many(iterator)
                    return next
                }
            }
        }
    }

    private var sockets: [UUID: Socket] = [:]
    private var byUser: [UUID: Connections] = [:]
    /// Registered sockets.
    private(set) var registeredCount = 0

    /// Sockets in any state.
    var count: Int { sockets.count }

    /// The state of `connection`; nil once it closed. Setting a state keeps the indexes
    /// in step (registered sockets are indexed, others are not); nil forgets it.
    subscript(connection: UUID) -> Socket? {
        get { sockets[connection] }
        set {
            let old = newValue.map { sockets.updateValue($0, forKey: connection) } ?? sockets.removeValue(forKey: connection)
            if case .registered(let record)? = old { unindex(record, connection) }
            if case .registered(let record)? = newValue { index(record, connection) }
            if sockets.isEmpty { self = SocketTable() }  // a surge's tables are given back
        }
    }

    /// The record of `connection`, if it is registered.
    func record(_ connection: UUID) -> Record? {
        guard case .registered(let record)? = sockets[connection] else { return nil }
        return record
    }

    /// Every socket with its state (drain, re-registration).
    var all: Dictionary<UUID, Socket> { sockets }

    /// The connections of `user`'s registered phones here.
    func connections(ofUser user: UUID) -> Connections? { byUser[user] }

    private mutating func index(_ record: Record, _ connection: UUID) {
        registeredCount += 1
        byUser[record.handle.user] = byUser[record.handle.user]?.inserting(connection) ?? .one(connection)
    }

    private mutating func unindex(_ record: Record, _ connection: UUID) {
        registeredCount -= 1
        byUser[record.handle.user] = byUser[record.handle.user]?.removing(connection)
    }
}

/// What the instance's value keeps a socket by: a reference that knows the socket's id, its
/// verified user and session, and when it opened. The driver's sockets (`DeviceSession`)
/// are its subclasses; the value hands them back in its actions and calls nothing on them.
/// A class rather than a protocol, so that the values are not generic: Relay calls them
/// across the module boundary, where generic code would run unspecialised.
open class PhoneHandle: @unchecked Sendable {
    /// The socket's id (relay.connections.id).
    public let connection: UUID
    /// The verified user of the socket.
    public let user: UUID
    /// The verified session of the socket.
    public let sessionID: UUID
    /// When it opened: of two sockets of one device, the later one wins.
    public let openedAt: Date

    /// A socket of `user`'s session `sessionID`.
    public init(connection: UUID = UUID(), user: UUID, sessionID: UUID, openedAt: Date) {
        self.connection = connection
        self.user = user
        self.sessionID = sessionID
        self.openedAt = openedAt
    }
}

extension SocketTable.Hello: Sendable {}
extension SocketTable.Record: Sendable {}
