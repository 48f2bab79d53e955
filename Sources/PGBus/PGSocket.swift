import CLibPQ
import Foundation
import Glibc

/// Waiting on a libpq connection's socket, and reading libpq's results.
enum PGSocket {
    /// What to wait for.
    struct Events: OptionSet {
        let rawValue: Int16
        static let read = Events(rawValue: Int16(POLLIN))
        static let write = Events(rawValue: Int16(POLLOUT))
    }

    /// Waits until the socket is ready or `timeoutMilliseconds` pass (-1: no limit).
    /// Also returns early when `wakeFD` (if any) becomes readable.
    /// - Returns: false on timeout.
    static func wait(_ connection: OpaquePointer, for events: Events, timeoutMilliseconds: Int32,
                     wakeFD: Int32 = -1) throws -> Bool {
        let fd = PQsocket(connection)
        guard fd >= 0 else { throw PGError(.connectionClosed, detail: "no socket") }
        var fds = [pollfd(fd: fd, events: events.rawValue, revents: 0),
                   pollfd(fd: wakeFD, events: Int16(POLLIN), revents: 0)]
        while true {
            let count = poll(&fds, wakeFD >= 0 ? 2 : 1, timeoutMilliseconds)
            if count < 0 && errno == EINTR { continue }
            if count < 0 { throw PGError(.connectionClosed, detail: "poll failed: errno \(errno)") }
            return count > 0
        }
    }

    /// Sends what libpq has buffered and collects every result of the statement in flight,
    /// waiting on the socket in between. `onIdle` runs after each read (the listener uses it
    /// to drain notifications). Throws `connectionClosed` when the connection breaks and a
    /// `server` error when the statement failed.
    static func collectResults(_ connection: OpaquePointer, timeoutMilliseconds: Int32 = -1,
                               onRead: () -> Void = {}) throws -> [OpaquePointer] {
        var results: [OpaquePointer] = []
        do {
            while true {
                let flushed = PQflush(connection)
                if flushed < 0 { throw connectionError(connection) }
                if flushed == 1 {
                    guard try wait(connection, for: [.read, .write], timeoutMilliseconds: timeoutMilliseconds) else {
                        throw PGError(.connectionClosed, detail: "timed out sending")
                    }
                    if PQconsumeInput(connection) == 0 { throw connectionError(connection) }
                    onRead()
                    continue
                }
                if PQisBusy(connection) == 1 {
                    guard try wait(connection, for: .read, timeoutMilliseconds: timeoutMilliseconds) else {
                        throw PGError(.connectionClosed, detail: "timed out waiting for the server")
                    }
                    if PQconsumeInput(connection) == 0 { throw connectionError(connection) }
                    onRead()
                    continue
                }
                guard let result = PQgetResult(connection) else { break }
                results.append(result)
            }
        } catch {
            results.forEach { PQclear($0) }
            throw error
        }
        if PQstatus(connection) != CONNECTION_OK {
            results.forEach { PQclear($0) }
            throw connectionError(connection)
        }
        return results
    }

    /// The error of a failed result, or nil when it succeeded.
    static func resultError(_ result: OpaquePointer) -> PGError? {
        switch PQresultStatus(result) {
        case PGRES_COMMAND_OK, PGRES_TUPLES_OK, PGRES_EMPTY_QUERY, PGRES_SINGLE_TUPLE:
            return nil
        default:
            let state = PQresultErrorField(result, Int32(UInt8(ascii: "C"))).map { String(cString: $0) }
            let message = PQresultErrorMessage(result).map { String(cString: $0) }
            return PGError(state == nil ? .connectionClosed : .server, sqlState: state,
                           detail: message?.trimmingCharacters(in: .whitespacesAndNewlines))
        }
    }

    /// The connection's current error, as `connectionClosed`.
    static func connectionError(_ connection: OpaquePointer) -> PGError {
        let message = PQerrorMessage(connection).map { String(cString: $0) }
        return PGError(.connectionClosed, detail: message?.trimmingCharacters(in: .whitespacesAndNewlines))
    }

    /// Copies a result into Swift values (text format).
    static func decode(_ result: OpaquePointer) -> PGQueryResult {
        let rowCount = Int(PQntuples(result))
        let columnCount = Int(PQnfields(result))
        let columns = PGColumns(names: (0..<columnCount).map { String(cString: PQfname(result, Int32($0))) })
        var rows: [PGRow] = []
        rows.reserveCapacity(rowCount)
        for row in 0..<rowCount {
            var values: [String?] = []
            values.reserveCapacity(columnCount)
            for column in 0..<columnCount {
                if PQgetisnull(result, Int32(row), Int32(column)) == 1 {
                    values.append(nil)
                } else {
                    let length = Int(PQgetlength(result, Int32(row), Int32(column)))
                    let pointer = UnsafeRawPointer(PQgetvalue(result, Int32(row), Int32(column))!)
                    values.append(String(decoding: UnsafeRawBufferPointer(start: pointer, count: length), as: UTF8.self))
                }
            }
            rows.append(PGRow(columns: columns, values: values))
        }
        let tuples = PQcmdTuples(result).map { String(cString: $0) } ?? ""
        return PGQueryResult(rows: rows, affectedRows: Int(tuples) ?? rowCount)
    }
}
