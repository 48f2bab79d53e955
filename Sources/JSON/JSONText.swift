import Foundation

/// Hand-written JSON for the fixed message shapes on a locate's path (the agent's answer,
/// the phone's ping, the sealed fix): no JSONSerialization, JSONEncoder or date formatter
/// per call. Keys are written in the order given; values are escaped as RFC 8259 requires
/// (and `/` is left alone, as `.withoutEscapingSlashes` does).
public struct JSONText {
    /// The object so far, closed: each member goes in before the closing brace, so the
    /// finished object is this text itself (no copy to close it).
    private var text = "{}"
    private var empty = true

    /// Starts an object.
    public init() {
        text.reserveCapacity(256)
    }

    /// The finished object.
    public var object: String { text }

    /// Opens the object for one more member (its value follows; `close()` ends it).
    private mutating func key(_ name: String) {
        text.removeLast()  // }
        if !empty { text += "," }
        empty = false
        Self.appendQuoted(name, to: &text)
        text += ":"
    }

    private mutating func close() {
        text += "}"
    }

    /// `"name":"value"`, or `"name":null` for nil.
    public mutating func string(_ name: String, _ value: String?) {
        key(name)
        if let value { Self.appendQuoted(value, to: &text) } else { text += "null" }
        close()
    }

    /// `"name":number`, or `"name":null` for nil; integral values without a fraction.
    public mutating func number(_ name: String, _ value: Double?) {
        key(name)
        text += value.map(Self.number) ?? "null"
        close()
    }

    /// `"name":integer`.
    public mutating func integer(_ name: String, _ value: Int64) {
        key(name)
        text += String(value)
        close()
    }

    /// `"name":<json>` for an object or array written elsewhere (or null).
    public mutating func raw(_ name: String, _ json: String?) {
        key(name)
        text += json ?? "null"
        close()
    }

    /// A number as JSON: integral values below 2^53 as integers, others in Swift's
    /// shortest round-trip form; NaN and infinities (which JSON cannot hold) as null.
    public static func number(_ value: Double) -> String {
        guard value.isFinite else { return "null" }
        if value == value.rounded(), abs(value) < 9_007_199_254_740_992 { return String(Int64(value)) }
        return String(value)
    }

    /// Appends `value` as a JSON string.
    public static func appendQuoted(_ value: String, to text: inout String) {
        // Most values (ids, names) need no escape: one scan of their bytes, one append.
        if value.utf8.allSatisfy({ $0 >= 0x20 && $0 != 0x22 && $0 != 0x5C }) {
            text += "\""
            text += value
            text += "\""
            return
        }
        text += "\""
        var plainStart = value.unicodeScalars.startIndex
        var index = plainStart
        let scalars = value.unicodeScalars
        while index != scalars.endIndex {
            let scalar = scalars[index]
            let escaped: String? = switch scalar {
            case "\"": "\\\""
            case "\\": "\\\\"
            case "\n": "\\n"
            case "\r": "\\r"
            case "\t": "\\t"
            case _ where scalar.value < 0x20: "\\u" + String(repeating: "0", count: 4 - String(scalar.value, radix: 16).count)
                + String(scalar.value, radix: 16)
            default: nil
            }
            if let escaped {
                text.unicodeScalars.append(contentsOf: scalars[plainStart..<index])
                text += escaped
                plainStart = scalars.index(after: index)
            }
            index = scalars.index(after: index)
        }
        text.unicodeScalars.append(contentsOf: scalars[plainStart..<scalars.endIndex])
        text += "\""
    }

    /// `value` as a JSON string.
    public static func quoted(_ value: String) -> String {
        var text = ""
        appendQuoted(value, to: &text)
        return text
    }

    /// An instant as RFC 3339 UTC with milliseconds (`2026-11-30T00:53:20.120Z`), computed
    /// from the epoch milliseconds without a formatter.
    public static func timestamp(milliseconds: Int64) -> String {
        let (days, millisecondOfDay) = floorDivision(milliseconds, 86_400_000)
        // Howard Hinnant's civil_from_days.
        let z = days + 719_468
        let era = (z >= 0 ? z : z - 146_096) / 146_097
        let dayOfEra = z - era * 146_097
        let yearOfEra = (dayOfEra - dayOfEra / 1460 + dayOfEra / 36_524 - dayOfEra / 146_096) / 365
        let dayOfYear = dayOfEra - (365 * yearOfEra + yearOfEra / 4 - yearOfEra / 100)
        let monthIndex = (5 * dayOfYear + 2) / 153
        let day = dayOfYear - (153 * monthIndex + 2) / 5 + 1
        let month = monthIndex < 10 ? monthIndex + 3 : monthIndex - 9
        let year = yearOfEra + era * 400 + (month <= 2 ? 1 : 0)
        let seconds = millisecondOfDay / 1000
        guard (0...9999).contains(year) else {
            return pad(year, 4) + "-" + pad(month, 2) + "-" + pad(day, 2) + "T" + pad(seconds / 3600, 2) + ":"
                + pad(seconds / 60 % 60, 2) + ":" + pad(seconds % 60, 2) + "." + pad(millisecondOfDay % 1000, 3) + "Z"
        }
        // The common case written into the string's own 24 bytes: one allocation, not one
        // per field and separator.
        return String(unsafeUninitializedCapacity: 24) { buffer in
            var index = 0
            write(year, 4, "-", to: buffer, at: &index)
            write(month, 2, "-", to: buffer, at: &index)
            write(day, 2, "T", to: buffer, at: &index)
            write(seconds / 3600, 2, ":", to: buffer, at: &index)
            write(seconds / 60 % 60, 2, ":", to: buffer, at: &index)
            write(seconds % 60, 2, ".", to: buffer, at: &index)
            write(millisecondOfDay % 1000, 3, "Z", to: buffer, at: &index)
            return index
        }
    }

    /// Writes `value` (not negative) as `width` digits, then `separator`.
    private static func write(_ value: Int64, _ width: Int, _ separator: Unicode.Scalar,
                              to buffer: UnsafeMutableBufferPointer<UInt8>, at index: inout Int) {
        var rest = value
        for offset in (0..<width).reversed() {
            buffer[index + offset] = UInt8(truncatingIfNeeded: 48 + rest % 10)
            rest /= 10
        }
        buffer[index + width] = UInt8(truncatingIfNeeded: separator.value)
        index += width + 1
    }

    private static func floorDivision(_ value: Int64, _ divisor: Int64) -> (Int64, Int64) {
        let quotient = value / divisor, remainder = value % divisor
        return remainder < 0 ? (quotient - 1, remainder + divisor) : (quotient, remainder)
    }

    private static func pad(_ value: Int64, _ width: Int) -> String {
        let digits = String(value)
        return digits.count >= width ? digits : String(repeating: "0", count: width - digits.count) + digits
    }
}
