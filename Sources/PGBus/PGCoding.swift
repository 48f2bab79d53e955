import Foundation

/// A Swift value that can be sent as a query parameter.
///
/// Parameters travel in PostgreSQL's text format with no declared type, so the server
/// infers each `$n` from its context (add a cast such as `$1::uuid` where it cannot).
public protocol PGEncodable: Sendable {
    /// The value in PostgreSQL's text input format.
    var pgText: String { get }
    /// The parameter as sent: `pgText`, or nil for SQL NULL. Only `Optional` overrides it.
    var pgParameter: String? { get }
}

extension PGEncodable {
    public var pgParameter: String? { pgText }
}

/// A Swift value that can be read from a result column in PostgreSQL's text format.
public protocol PGDecodable: Sendable {
    /// Decodes the text form of a non-null value.
    /// - Parameter pgText: the value as the server sent it (DateStyle ISO, TimeZone UTC).
    init(pgText: String) throws
}

/// Both directions.
public typealias PGCodable = PGEncodable & PGDecodable

extension PGError {
    static func decoding(_ type: Any.Type, _ text: String) -> PGError {
        // The value itself stays out of the message's public part.
        PGError(.decoding, detail: "cannot decode \(type) from \(text.prefix(40).debugDescription)")
    }
}

extension String: PGCodable {
    public var pgText: String { self }
    public init(pgText: String) { self = pgText }
}

extension Bool: PGCodable {
    public var pgText: String { self ? "true" : "false" }
    public init(pgText: String) throws {
        switch pgText {
        case "t", "true": self = true
        case "f", "false": self = false
        default: throw PGError.decoding(Bool.self, pgText)
        }
    }
}

extension Int: PGCodable {
    public var pgText: String { String(self) }
    public init(pgText: String) throws {
        guard let value = Int(pgText) else { throw PGError.decoding(Int.self, pgText) }
        self = value
    }
}

extension Int32: PGCodable {
    public var pgText: String { String(self) }
    public init(pgText: String) throws {
        guard let value = Int32(pgText) else { throw PGError.decoding(Int32.self, pgText) }
        self = value
    }
}

extension Int64: PGCodable {
    public var pgText: String { String(self) }
    public init(pgText: String) throws {
        guard let value = Int64(pgText) else { throw PGError.decoding(Int64.self, pgText) }
        self = value
    }
}

extension Double: PGCodable {
    public var pgText: String {
        if isNaN { return "NaN" }
        if isInfinite { return self > 0 ? "Infinity" : "-Infinity" }
        return "\(self)"
    }
    public init(pgText: String) throws {
        switch pgText {
        case "NaN": self = .nan
        case "Infinity": self = .infinity
        case "-Infinity": self = -.infinity
        default:
            guard let value = Double(pgText) else { throw PGError.decoding(Double.self, pgText) }
            self = value
        }
    }
}

extension UUID: PGCodable {
    public var pgText: String { uuidString.lowercased() }
    public init(pgText: String) throws {
        guard let value = UUID(uuidString: pgText) else { throw PGError.decoding(UUID.self, pgText) }
        self = value
    }
}

extension Data: PGCodable {
    /// bytea in hex format: `\x` followed by two hex digits a byte.
    public var pgText: String {
        let digits = Array("0123456789abcdef".utf8)
        var bytes = [UInt8](repeating: 0, count: 2 + count * 2)
        bytes[0] = UInt8(ascii: "\\")
        bytes[1] = UInt8(ascii: "x")
        var index = 2
        for byte in self {
            bytes[index] = digits[Int(byte >> 4)]
            bytes[index + 1] = digits[Int(byte & 0x0f)]
            index += 2
        }
        return String(decoding: bytes, as: UTF8.self)
    }

    public init(pgText: String) throws {
        let utf8 = Array(pgText.utf8)
        guard utf8.count >= 2, utf8[0] == UInt8(ascii: "\\"), utf8[1] == UInt8(ascii: "x"), utf8.count % 2 == 0 else {
            throw PGError.decoding(Data.self, pgText)
        }
        func nibble(_ c: UInt8) -> UInt8? {
            switch c {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): c - UInt8(ascii: "0")
            case UInt8(ascii: "a")...UInt8(ascii: "f"): c - UInt8(ascii: "a") + 10
            case UInt8(ascii: "A")...UInt8(ascii: "F"): c - UInt8(ascii: "A") + 10
            default: nil
            }
        }
        var bytes = [UInt8]()
        bytes.reserveCapacity((utf8.count - 2) / 2)
        var index = 2
        while index < utf8.count {
            guard let high = nibble(utf8[index]), let low = nibble(utf8[index + 1]) else {
                throw PGError.decoding(Data.self, pgText)
            }
            bytes.append(high << 4 | low)
            index += 2
        }
        self = Data(bytes)
    }
}

/// A `json`/`jsonb` value: raw JSON text, with helpers to go to and from `Codable` types.
public struct PGJSON: PGCodable, Equatable {
    /// The JSON text.
    public let text: String

    /// Wraps JSON text as it is.
    public init(text: String) { self.text = text }

    /// Encodes a value with `JSONEncoder` (sorted keys, so equal values give equal text).
    public init(_ value: some Encodable) throws {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        self.text = String(decoding: try encoder.encode(value), as: UTF8.self)
    }

    /// Decodes the JSON into `type`.
    public func decode<T: Decodable>(_ type: T.Type) throws -> T {
        do {
            return try JSONDecoder().decode(type, from: Data(text.utf8))
        } catch {
            throw PGError(.decoding, detail: "JSON does not decode as \(type)")
        }
    }

    public var pgText: String { text }
    public init(pgText: String) { self.text = pgText }
}

extension Optional: PGEncodable where Wrapped: PGEncodable {
    /// The wrapped value's text; `pgParameter` is what decides NULL.
    public var pgText: String { self?.pgText ?? "" }
    /// SQL NULL for `nil`.
    public var pgParameter: String? { self?.pgParameter }
}
