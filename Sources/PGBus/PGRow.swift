/// One result row: values in text format, readable by column name or index.
public struct PGRow: Sendable {
    /// The column names, shared by every row of a result.
    public let columns: PGColumns
    /// The raw text of each value, nil for SQL NULL.
    public let values: [String?]

    /// Decodes column `index` as `T`; a NULL is an error (ask for `T?` to allow it).
    public func decode<T: PGDecodable>(_ index: Int, as type: T.Type = T.self) throws -> T {
        guard values.indices.contains(index) else { throw PGError(.noSuchColumn, detail: "column \(index)") }
        guard let text = values[index] else {
            throw PGError(.decoding, detail: "column \(columns.names[index]) is NULL; decode as Optional")
        }
        return try T(pgText: text)
    }

    /// Decodes column `index` as `T?`, nil for NULL.
    public func decode<T: PGDecodable>(_ index: Int, as type: T?.Type = T?.self) throws -> T? {
        guard values.indices.contains(index) else { throw PGError(.noSuchColumn, detail: "column \(index)") }
        return try values[index].map { try T(pgText: $0) }
    }

    /// Decodes the column named `name` as `T`; a NULL is an error.
    public func decode<T: PGDecodable>(_ name: String, as type: T.Type = T.self) throws -> T {
        try decode(try columns.index(of: name), as: type)
    }

    /// Decodes the column named `name` as `T?`, nil for NULL.
    public func decode<T: PGDecodable>(_ name: String, as type: T?.Type = T?.self) throws -> T? {
        try decode(try columns.index(of: name), as: type)
    }

    /// Whether column `name` is NULL.
    public func isNull(_ name: String) throws -> Bool {
        values[try columns.index(of: name)] == nil
    }
}

/// The column names of a result, with a lookup by name.
public final class PGColumns: Sendable {
    /// Names in result order.
    public let names: [String]
    private let positions: [String: Int]

    init(names: [String]) {
        self.names = names
        var positions: [String: Int] = [:]
        for (index, name) in names.enumerated() where positions[name] == nil {
            positions[name] = index
        }
        self.positions = positions
    }

    /// The index of the first column called `name`.
    public func index(of name: String) throws -> Int {
        guard let index = positions[name] else { throw PGError(.noSuchColumn, detail: name) }
        return index
    }
}

/// The outcome of one statement: its rows (if any) and how many rows it affected.
public struct PGQueryResult: Sendable {
    /// The rows, in order.
    public let rows: [PGRow]
    /// Rows inserted, updated, deleted or returned, as the server's command tag says.
    public let affectedRows: Int

    /// The first row, if any.
    public var first: PGRow? { rows.first }

    /// The single value of a one-row, one-column result (for `select f(...)`).
    public func scalar<T: PGDecodable>(_ type: T.Type = T.self) throws -> T {
        guard let row = rows.first, rows.count == 1, row.values.count == 1 else {
            throw PGError(.decoding, detail: "expected one row with one column, got \(rows.count) rows")
        }
        return try row.decode(0, as: type)
    }

    /// The single value, nil when it is NULL.
    public func scalar<T: PGDecodable>(_ type: T?.Type = T?.self) throws -> T? {
        guard let row = rows.first, rows.count == 1, row.values.count == 1 else {
            throw PGError(.decoding, detail: "expected one row with one column, got \(rows.count) rows")
        }
        return try row.decode(0, as: type)
    }
}
