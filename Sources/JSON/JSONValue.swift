import Foundation

/// A JSON value (RFC 8259) and the one strict parser for every peer, database and log
/// payload: phone messages, MCP and HTTP bodies, JWTs and JWKS, notification payloads,
/// the database's JSON results, push services' responses and the sealed fix. No Foundation
/// parser and no `Codable` machinery per message. `text` (JSONValue+Text) writes one.
///
/// Strict and bounded: anything RFC 8259 does not allow (trailing commas, comments, bare
/// control characters in strings, lone surrogates, leading zeros, `NaN`) is refused,
/// nesting deeper than `maximumDepth` is refused, and a number that overflows a Double
/// parses but has no `number` (so a field holding 1e400 is a bad value, not a bad message). Every peer byte that reaches it is fuzzed
/// (`Fuzz/PhoneMessageFuzz.swift`, `Fuzz/NotificationFuzz.swift`).
public enum JSONValue: Equatable, Sendable {
    /// `null`.
    case null
    /// `true` or `false`.
    case bool(Bool)
    /// A number (IEEE double, as JavaScript reads JSON).
    case number(Double)
    /// A string.
    case string(String)
    /// An array.
    case array([JSONValue])
    /// An object (member order is not kept: the writer sorts keys).
    case object([String: JSONValue])

    /// The deepest nesting of arrays and objects accepted.
    public static let maximumDepth = 32

    /// Parses `text`; nil unless it is exactly one JSON value (with optional whitespace).
    public static func parse(_ text: String) -> JSONValue? {
        var text = text
        return text.withUTF8 { bytes in
            var parser = Parser(bytes: bytes)
            guard let value = parser.value(depth: 0) else { return nil }
            parser.skipWhitespace()
            return parser.index == bytes.count ? value : nil
        }
    }

    /// The member `key` of an object (nil for other values or a missing key).
    public subscript(key: String) -> JSONValue? {
        if case .object(let members) = self { members[key] } else { nil }
    }

    /// The string, if this is one.
    public var string: String? {
        if case .string(let value) = self { value } else { nil }
    }

    /// The number, if this is one and finite.
    public var number: Double? {
        if case .number(let value) = self, value.isFinite { value } else { nil }
    }

    /// The number as an Int64 when it is integral and in range.
    public var integer: Int64? {
        guard let number, number == number.rounded(), abs(number) < 9.2e18 else { return nil }
        return Int64(number)
    }

    /// The boolean, if this is one.
    public var bool: Bool? {
        if case .bool(let value) = self { value } else { nil }
    }


    /// Whether this is `null`.
    public var isNull: Bool { self == .null }

    private struct Parser {
        let bytes: UnsafeBufferPointer<UInt8>
        var index = 0
        /// The members of the objects being parsed, innermost last: an object's members are
        /// gathered here and its dictionary is made once, at its exact size, when it closes
        /// (one allocation per object, instead of one per growth of a dictionary built
        /// member by member); the buffer is shared by every object of one parse.
        var members: [(key: String, value: JSONValue)] = []

        init(bytes: UnsafeBufferPointer<UInt8>) {
            self.bytes = bytes
        }

        /// The members the buffer starts with room for.
        static let expectedMembers = 16

        mutating func skipWhitespace() {
            while index < bytes.count, [0x20, 0x09, 0x0A, 0x0D].contains(bytes[index]) { index += 1 }
        }

        mutating func value(depth: Int) -> JSONValue? {
            skipWhitespace()
            guard index < bytes.count else { return nil }
            switch bytes[index] {
            case UInt8(ascii: "{"): return depth < JSONValue.maximumDepth ? object(depth: depth + 1) : nil
            case UInt8(ascii: "["): return depth < JSONValue.maximumDepth ? array(depth: depth + 1) : nil
            case UInt8(ascii: "\""): return string().map(JSONValue.string)
            case UInt8(ascii: "t"): return literal("true", .bool(true))
            case UInt8(ascii: "f"): return literal("false", .bool(false))
            case UInt8(ascii: "n"): return literal("null", .null)
            default: return number()
            }
        }

        private mutating func literal(_ word: StaticString, _ value: JSONValue) -> JSONValue? {
            let count = word.utf8CodeUnitCount
            guard bytes.count - index >= count else { return nil }
            for offset in 0..<count where bytes[index + offset] != word.utf8Start[offset] { return nil }
            index += count
            return value
        }

        private mutating func object(depth: Int) -> JSONValue? {
            index += 1  // {
            skipWhitespace()
            if index < bytes.count, bytes[index] == UInt8(ascii: "}") {
                index += 1
                return .object([:])
            }
            // Room for the members of the relay's payloads at once (a ping's or a
            // notification's dozen, with an object inside): the buffer does not grow member by
            // member either.
            if members.capacity == 0 { members.reserveCapacity(Self.expectedMembers) }
            let first = members.count
            while true {
                skipWhitespace()
                guard index < bytes.count, bytes[index] == UInt8(ascii: "\""), let key = string() else { return nil }
                skipWhitespace()
                guard index < bytes.count, bytes[index] == UInt8(ascii: ":") else { return nil }
                index += 1
                guard let member = value(depth: depth) else { return nil }
                members.append((key, member))
                skipWhitespace()
                guard index < bytes.count else { return nil }
                if bytes[index] == UInt8(ascii: ",") {
                    index += 1
                } else if bytes[index] == UInt8(ascii: "}") {
                    index += 1
                    var object = [String: JSONValue](minimumCapacity: members.count - first)
                    for member in members[first...] { object[member.key] = member.value }  // a repeated key: the last
                    members.removeSubrange(first...)
                    return .object(object)
                } else {
                    return nil
                }
            }
        }

        private mutating func array(depth: Int) -> JSONValue? {
            index += 1  // [
            var elements: [JSONValue] = []
            skipWhitespace()
            if index < bytes.count, bytes[index] == UInt8(ascii: "]") {
                index += 1
                return .array(elements)
            }
            while true {
                guard let element = value(depth: depth) else { return nil }
                elements.append(element)
                skipWhitespace()
                guard index < bytes.count else { return nil }
                if bytes[index] == UInt8(ascii: ",") {
                    index += 1
                } else if bytes[index] == UInt8(ascii: "]") {
                    index += 1
                    return .array(elements)
                } else {
                    return nil
                }
            }
        }

        /// A string starting at the opening quote; the input is valid UTF-8 already.
        private mutating func string() -> String? {
            index += 1  // "
            let start = index
            // Fast path: no escapes.
            while index < bytes.count {
                let byte = bytes[index]
                if byte == UInt8(ascii: "\"") {
                    defer { index += 1 }
                    return String(decoding: UnsafeBufferPointer(rebasing: bytes[start..<index]), as: UTF8.self)
                }
                if byte == UInt8(ascii: "\\") { break }
                if byte < 0x20 { return nil }
                index += 1
            }
            var scalars = String.UnicodeScalarView()
            scalars.append(contentsOf: String(decoding: UnsafeBufferPointer(rebasing: bytes[start..<index]), as: UTF8.self).unicodeScalars)
            while index < bytes.count {
                let byte = bytes[index]
                if byte == UInt8(ascii: "\"") {
                    index += 1
                    return String(scalars)
                }
                if byte < 0x20 { return nil }
                if byte != UInt8(ascii: "\\") {
                    // Copy one whole UTF-8 sequence.
                    let length = byte < 0x80 ? 1 : byte >= 0xF0 ? 4 : byte >= 0xE0 ? 3 : 2
                    guard index + length <= bytes.count else { return nil }
                    scalars.append(contentsOf: String(decoding: UnsafeBufferPointer(rebasing: bytes[index..<(index + length)]),
                                                      as: UTF8.self).unicodeScalars)
                    index += length
                    continue
                }
                index += 1
                guard index < bytes.count else { return nil }
                let escaped = bytes[index]
                index += 1
                switch escaped {
                case UInt8(ascii: "\""): scalars.append("\"")
                case UInt8(ascii: "\\"): scalars.append("\\")
                case UInt8(ascii: "/"): scalars.append("/")
                case UInt8(ascii: "b"): scalars.append("\u{08}")
                case UInt8(ascii: "f"): scalars.append("\u{0C}")
                case UInt8(ascii: "n"): scalars.append("\n")
                case UInt8(ascii: "r"): scalars.append("\r")
                case UInt8(ascii: "t"): scalars.append("\t")
                case UInt8(ascii: "u"):
                    guard let unit = hex4() else { return nil }
                    if (0xD800...0xDBFF).contains(unit) {
                        guard index + 1 < bytes.count, bytes[index] == UInt8(ascii: "\\"), bytes[index + 1] == UInt8(ascii: "u") else {
                            return nil
                        }
                        index += 2
                        guard let low = hex4(), (0xDC00...0xDFFF).contains(low),
                              let scalar = Unicode.Scalar(0x10000 + ((unit - 0xD800) << 10) + (low - 0xDC00)) else { return nil }
                        scalars.append(scalar)
                    } else {
                        guard let scalar = Unicode.Scalar(unit) else { return nil }  // a lone low surrogate
                        scalars.append(scalar)
                    }
                default:
                    return nil
                }
            }
            return nil
        }

        private mutating func hex4() -> UInt32? {
            guard bytes.count - index >= 4 else { return nil }
            var value: UInt32 = 0
            for _ in 0..<4 {
                let byte = bytes[index]
                let digit: UInt8
                switch byte {
                case UInt8(ascii: "0")...UInt8(ascii: "9"): digit = byte - UInt8(ascii: "0")
                case UInt8(ascii: "a")...UInt8(ascii: "f"): digit = byte - UInt8(ascii: "a") + 10
                case UInt8(ascii: "A")...UInt8(ascii: "F"): digit = byte - UInt8(ascii: "A") + 10
                default: return nil
                }
                value = value << 4 | UInt32(digit)
                index += 1
            }
            return value
        }

        /// A number per RFC 8259's grammar; nil when malformed or beyond a Double.
        private mutating func number() -> JSONValue? {
            let start = index
            func digits() -> Int {
                let from = index
                while index < bytes.count, (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(bytes[index]) { index += 1 }
                return index - from
            }
            if index < bytes.count, bytes[index] == UInt8(ascii: "-") { index += 1 }
            guard index < bytes.count else { return nil }
            if bytes[index] == UInt8(ascii: "0") {
                index += 1
            } else if digits() == 0 {
                return nil
            }
            if index < bytes.count, bytes[index] == UInt8(ascii: ".") {
                index += 1
                guard digits() > 0 else { return nil }
            }
            if index < bytes.count, bytes[index] == UInt8(ascii: "e") || bytes[index] == UInt8(ascii: "E") {
                index += 1
                if index < bytes.count, bytes[index] == UInt8(ascii: "+") || bytes[index] == UInt8(ascii: "-") { index += 1 }
                guard digits() > 0 else { return nil }
            }
            guard index - start <= 1024,
                  let value = Double(String(decoding: UnsafeBufferPointer(rebasing: bytes[start..<index]), as: UTF8.self))
            else { return nil }
            return .number(value)
        }
    }
}
