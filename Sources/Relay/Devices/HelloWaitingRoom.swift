import Foundation
import Synchronization

/// Sockets that opened but have not said hello yet, counted per account and per client
/// address (SPEC §8): each costs a slot for up to 10 s and a session check, so one account
/// or one address may hold only a few at once; more are refused before the upgrade (429).
final class HelloWaitingRoom: Sendable {
    /// Sockets of one account waiting for their hello at once.
    static let maximumPerAccount = 5
    /// Sockets from one client address waiting for their hello at once (a few phones may
    /// share an address behind a NAT).
    static let maximumPerAddress = 10

    private struct Counts {
        var accounts: [UUID: Int] = [:]
        var addresses: [String: Int] = [:]
    }

    private let counts = Mutex(Counts())

    /// Whether `address` already holds as many waiting sockets as it may (checked before
    /// the credential, so a flood costs no verification).
    func isFull(address: String) -> Bool {
        counts.withLock { $0.addresses[address, default: 0] >= Self.maximumPerAddress }
    }

    /// A place for a socket of `account` from `address`, or nil when either is full. The
    /// place is given back when the ticket is dropped.
    func admit(account: UUID, address: String) -> Ticket? {
        let admitted = counts.withLock { counts -> Bool in
            guard counts.accounts[account, default: 0] < Self.maximumPerAccount,
                  counts.addresses[address, default: 0] < Self.maximumPerAddress else { return false }
            counts.accounts[account, default: 0] += 1
            counts.addresses[address, default: 0] += 1
            return true
        }
        return admitted ? Ticket(room: self, account: account, address: address) : nil
    }

    /// Sockets waiting now, all accounts together.
    var count: Int { counts.withLock { $0.accounts.values.reduce(0, +) } }

    private func leave(account: UUID, address: String) {
        counts.withLock { counts in
            counts.accounts[account, default: 1] -= 1
            if counts.accounts[account] == 0 { counts.accounts[account] = nil }
            counts.addresses[address, default: 1] -= 1
            if counts.addresses[address] == 0 { counts.addresses[address] = nil }
            if counts.accounts.isEmpty { counts = Counts() }  // a surge's tables are given back
        }
    }

    /// One socket's place; given back exactly once, when the ticket is freed (after the
    /// hello, at close — or when a socket whose upgrade never happened is dropped).
    final class Ticket: Sendable {
        private let room: HelloWaitingRoom
        private let account: UUID
        private let address: String

        fileprivate init(room: HelloWaitingRoom, account: UUID, address: String) {
            self.room = room
            self.account = account
            self.address = address
        }

        deinit { room.leave(account: account, address: address) }
    }
}
