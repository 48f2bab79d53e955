import Foundation

/// UUIDs as text without Foundation's `uuid_unparse`/`uuid_parse` (sprintf and sscanf per
/// call on Linux): the lowercase form Postgres writes, and a strict parser of the
/// 8-4-4-4-12 form (either case).
package enum UUIDText {
    private static let digits = Array("0123456789abcdef".utf8)

    /// `id` as lowercase 8-4-4-4-12 text.
    package static func lowercase(_ id: UUID) -> String {
        withUnsafeBytes(of: id.uuid) { bytes in
            String(unsafeUninitializedCapacity: 36) { buffer in
                var out = 0
                for (index, byte) in bytes.enumerated() {
                    if index == 4 || index == 6 || index == 8 || index == 10 {
                        buffer[out] = UInt8(ascii: "-")
                        out += 1
                    }
                    buffer[out] = digits[Int(byte >> 4)]
                    buffer[out + 1] = digits[Int(byte & 0x0F)]
                    out += 2
                }
                return out
            }
        }
    }

    /// The UUID in `text`, or nil unless it is exactly 8-4-4-4-12 hex digits.
    package static func parse(_ text: String) -> UUID? {
        var text = text
        return text.withUTF8 { bytes -> UUID? in
            guard bytes.count == 36 else { return nil }
            var value = [UInt8](repeating: 0, count: 16)
            var index = 0
            for position in 0..<16 {
                if index == 8 || index == 13 || index == 18 || index == 23 {
                    guard bytes[index] == UInt8(ascii: "-") else { return nil }
                    index += 1
                }
                guard let high = nibble(bytes[index]), let low = nibble(bytes[index + 1]) else { return nil }
                value[position] = high << 4 | low
                index += 2
            }
            return value.withUnsafeBytes { UUID(uuid: $0.load(as: uuid_t.self)) }
        }
    }

    private static func nibble(_ byte: UInt8) -> UInt8? {
        switch byte {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): byte - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): byte - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): byte - UInt8(ascii: "A") + 10
        default: nil
        }
    }
}
