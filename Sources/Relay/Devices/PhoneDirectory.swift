import Foundation

/// The phones connected to this instance after hello, as compact records: one small value
/// per socket keyed by its connection, and two indexes (by user for pings, by device for
/// replacement and revocation) that hold a single connection inline — the common case of
/// one phone per user and one socket per device allocates no set.
///
/// No I/O: the hub owns one and asks it; tests drive it directly. `Handle` is what the hub
/// sends through (a `DeviceSession`; anything in tests); it knows its user.
struct PhoneDirectory<Handle: PhoneHandle> {
    /// What the relay keeps of a phone that said hello (no email, no app version).
    struct Record {
        /// Where messages to the phone go (it knows the phone's verified user).
        let handle: Handle
        /// The device it said it is.
        let device: UUID
        /// Its platform, as one byte.
        let platform: Platform
        /// Its name as it said it (for the agent's answer).
        let name: String
    }

    /// The platforms a phone may declare (`PhoneMessage.platforms`).
    enum Platform: UInt8, Sendable {
        case ios, android, desktop, web

        /// The platform named `text`; web for anything else (as `PhoneMessage` reads hellos).
        init(_ text: String) {
            switch text {
            case "ios": self = .ios
            case "android": self = .android
            case "desktop": self = .desktop
            default: self = .web
            }
        }

        /// Its name on the wire and in the database.
        var text: String {
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

        func makeIterator() -> AnyIterator<UUID> {
            switch self {
            case .one(let connection):
                var done = false
                return AnyIterator { defer { done = true }; return done ? nil : connection }
            case .many(let set):
                return AnyIterator(set.makeIterator())
            }
        }
    }

    private var records: [UUID: Record] = [:]
    private var byUser: [UUID: Connections] = [:]
    private var byDevice: [UUID: Connections] = [:]

    /// Phones connected (after hello).
    var count: Int { records.count }

    /// The record of `connection`, if it said hello.
    subscript(connection: UUID) -> Record? { records[connection] }

    /// Every record (drain, expiry sweeps, re-registration).
    var all: Dictionary<UUID, Record>.Values { records.values }

    /// Remembers a socket that said hello (again: replaces its record).
    mutating func insert(_ record: Record, connection: UUID) {
        if records.updateValue(record, forKey: connection) != nil { return }
        byUser[record.handle.user] = byUser[record.handle.user]?.inserting(connection) ?? .one(connection)
        byDevice[record.device] = byDevice[record.device]?.inserting(connection) ?? .one(connection)
    }

    /// Forgets a socket; its record, or nil when it never said hello.
    @discardableResult
    mutating func remove(_ connection: UUID) -> Record? {
        guard let record = records.removeValue(forKey: connection) else { return nil }
        byUser[record.handle.user] = byUser[record.handle.user]?.removing(connection)
        byDevice[record.device] = byDevice[record.device]?.removing(connection)
        if records.isEmpty { self = PhoneDirectory() }  // a surge's tables are given back
        return record
    }

    /// The connections of `user`'s phones here.
    func connections(ofUser user: UUID) -> Connections? { byUser[user] }

    /// The connections of `device` here (more than one only while a replacement is under way).
    func connections(ofDevice device: UUID) -> Connections? { byDevice[device] }
}

/// What the directory keeps a phone by: a reference that knows the phone's user.
protocol PhoneHandle: AnyObject {
    /// The verified user of the socket.
    var user: UUID { get }
}

extension DeviceSession: PhoneHandle {}
