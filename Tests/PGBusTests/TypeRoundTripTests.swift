import Foundation
import PGBus
import Testing

/// Every supported type goes to the server as a parameter and comes back unchanged.
@Suite struct TypeRoundTripTests {
    func roundTrip<T: PGCodable & Equatable>(_ value: T, as sqlType: String) async throws -> T {
        let connection = try await TestDatabase.connect()
        defer { Task { await connection.close() } }
        return try await connection.query("select $1::\(sqlType)", [value]).scalar(T.self)
    }

    /// Text, including unicode beyond the BMP, quotes and backslashes.
    @Test func strings() async throws {
        for text in ["", "plain", "Zoë 🌍 日本語", "it's \"quoted\" \\ back\\slash", String(repeating: "x", count: 100_000)] {
            #expect(try await roundTrip(text, as: "text") == text)
        }
    }

    /// Integers at their limits, doubles with full precision and the special values.
    @Test func numbers() async throws {
        #expect(try await roundTrip(Int.max, as: "bigint") == Int.max)
        #expect(try await roundTrip(Int.min, as: "bigint") == Int.min)
        #expect(try await roundTrip(Int32.min, as: "int4") == Int32.min)
        #expect(try await roundTrip(Int64(42), as: "int8") == 42)
        #expect(try await roundTrip(52.520008123456789, as: "float8") == 52.520008123456789)
        #expect(try await roundTrip(-0.1, as: "float8") == -0.1)
        #expect(try await roundTrip(Double.infinity, as: "float8") == .infinity)
        #expect(try await roundTrip(5e-324, as: "float8") == 5e-324)
    }

    /// Booleans, UUIDs and timestamps with microseconds.
    @Test func boolUUIDDate() async throws {
        #expect(try await roundTrip(true, as: "bool") == true)
        #expect(try await roundTrip(false, as: "bool") == false)
        let id = UUID()
        #expect(try await roundTrip(id, as: "uuid") == id)
        let date = Date(timeIntervalSince1970: 1_796_000_000.123456)
        let back = try await roundTrip(date, as: "timestamptz")
        #expect(abs(back.timeIntervalSince1970 - date.timeIntervalSince1970) < 0.000_001)
        let old = Date(timeIntervalSince1970: -1_000_000_000.5)
        #expect(abs(try await roundTrip(old, as: "timestamptz").timeIntervalSince1970 - old.timeIntervalSince1970) < 0.000_001)
    }

    /// A timestamp written by the server in another offset decodes to the same instant.
    @Test func timestampWithOffset() throws {
        #expect(Date(timeIntervalSince1970: 1_796_000_000.12).pgText == "2026-11-30T00:53:20.120000Z")
        #expect(Date(timeIntervalSince1970: 0).pgText == "1970-01-01T00:00:00.000000Z")
        for seconds in [0.000001, 1_000_000_000.999999, 1_796_000_000.5, 4_102_444_799.25] {
            let date = Date(timeIntervalSince1970: seconds)
            #expect(abs(try Date(pgText: date.pgText).timeIntervalSince(date)) < 0.000_001, "\(date.pgText)")
        }
        let date = try Date(pgText: "2026-11-29 18:00:00.5+02")
        #expect(date == (try Date(pgText: "2026-11-29 16:00:00.5+00")))
        #expect(date == (try Date(pgText: "2026-11-29T16:00:00.500000Z")))
        #expect(throws: PGError.self) { try Date(pgText: "infinity") }
    }

    /// bytea of every byte value and of 1 MB.
    @Test func bytea() async throws {
        let all = Data((0...255).map { UInt8($0) })
        #expect(try await roundTrip(all, as: "bytea") == all)
        let megabyte = Data((0..<1_048_576).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ 7) })
        #expect(try await roundTrip(megabyte, as: "bytea") == megabyte)
        #expect(try await roundTrip(Data(), as: "bytea") == Data())
    }

    /// JSON to and from Codable values.
    @Test func json() async throws {
        struct Fix: Codable, Equatable { let latitude: Double; let name: String }
        let fix = Fix(latitude: 52.52, name: "Zoë")
        let back = try await roundTrip(try PGJSON(fix), as: "jsonb")
        #expect(try back.decode(Fix.self) == fix)
    }

    /// Arrays of text (with commas, quotes, braces, NULL-looking text), UUIDs and integers.
    @Test func arrays() async throws {
        let texts = ["a,b", "say \"hi\"", "{braces}", "NULL", "", "back\\slash", "ü"]
        #expect(try await roundTrip(texts, as: "text[]") == texts)
        let ids = [UUID(), UUID()]
        #expect(try await roundTrip(ids, as: "uuid[]") == ids)
        #expect(try await roundTrip([1, -2, 3], as: "int8[]") == [1, -2, 3])
        #expect(try await roundTrip([String](), as: "text[]") == [])
    }

    /// NULL parameters arrive as NULL, and NULL columns decode as nil (or fail as non-optional).
    @Test func nulls() async throws {
        let connection = try await TestDatabase.connect()
        defer { Task { await connection.close() } }
        let none: String? = nil
        let row = try #require(try await connection.query(
            "select $1::text as a, $2::uuid as b, $3::text[] as c, $4::int as d",
            [none, nil, [Optional("x"), nil], Optional(7)]).first)
        #expect(try row.decode("a", as: String?.self) == nil)
        #expect(try row.decode("b", as: UUID?.self) == nil)
        #expect(try row.isNull("a"))
        #expect(throws: PGError.self) { try row.decode("a", as: String.self) }
        #expect(try row.decode("d", as: Int.self) == 7)
        #expect(throws: PGError.self) { try row.decode("c", as: [String].self) }
        #expect(throws: PGError.self) { try row.decode("missing", as: String?.self) }
    }
}
