import CLibPQ
import Foundation
import Glibc

/// Reading libpq's results and errors.
enum PGSocket {
    /// The error of a failed result, or nil when it succeeded.
    static func resultError(_ result: OpaquePointer) -> PGError? {
        switch PQresultStatus(result) {
        case PGRES_COMMAND_OK, PGRES_TUPLES_OK, PGRES_EMPTY_QUERY, PGRES_SINGLE_TUPLE:
            return nil
        default:
            let state = PQresultErrorField(result, Int32(UInt8(ascii: "C"))).map { String(cString: $0) }
            let message = PQresultErrorMessage(result).map { String(cString: $0) }
            let primary = PQresultErrorField(result, Int32(UInt8(ascii: "M"))).map { String(cString: $0) }
            return PGError(state == nil ? .connectionClosed : .server, sqlState: state,
                           detail: message?.trimmingCharacters(in: .whitespacesAndNewlines), primaryMessage: primary)
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
