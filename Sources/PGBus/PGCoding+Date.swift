import Foundation

/// `timestamptz` with microsecond precision, always in UTC on the wire.
///
/// PGBus sessions run with DateStyle ISO and TimeZone UTC, so the server writes
/// `2026-11-29 16:00:00.12+00`; parameters are sent as `2026-11-29T16:00:00.120000Z`.
extension Date: PGCodable {
    public var pgText: String {
        let micros = (timeIntervalSince1970 * 1_000_000).rounded()
        var seconds = time_t(floor(micros / 1_000_000))
        let fraction = Int(micros - Double(seconds) * 1_000_000)
        var parts = tm()
        gmtime_r(&seconds, &parts)
        let year = Int(parts.tm_year) + 1900
        guard (0...9999).contains(year) else {
            // Outside four digits (never a time the relay sends): written as the server reads it.
            return "\(year)-\(parts.tm_mon + 1)-\(parts.tm_mday)T\(parts.tm_hour):\(parts.tm_min):\(parts.tm_sec).\(fraction)Z"
        }
        // `yyyy-mm-ddThh:mm:ss.ffffffZ`, written digit by digit into one buffer: the text is
        // made once (a date goes with every request opened).
        return String(unsafeUninitializedCapacity: 27) { buffer in
            var index = 0
            func put(_ value: Int, _ width: Int) {
                var value = value
                for offset in stride(from: width - 1, through: 0, by: -1) {
                    buffer[index + offset] = UInt8(ascii: "0") + UInt8(value % 10)
                    value /= 10
                }
                index += width
            }
            func put(_ character: Unicode.Scalar) {
                buffer[index] = UInt8(ascii: character)
                index += 1
            }
            put(year, 4); put("-"); put(Int(parts.tm_mon) + 1, 2); put("-"); put(Int(parts.tm_mday), 2)
            put("T"); put(Int(parts.tm_hour), 2); put(":"); put(Int(parts.tm_min), 2); put(":"); put(Int(parts.tm_sec), 2)
            put("."); put(fraction, 6); put("Z")
            return index
        }
    }

    public init(pgText: String) throws {
        // yyyy-mm-dd hh:mm:ss[.ffffff][+hh[:mm[:ss]]|-hh...]
        let bytes = Array(pgText.utf8)
        var index = 0
        func number(_ width: Int) throws -> Int {
            guard index + width <= bytes.count else { throw PGError.decoding(Date.self, pgText) }
            var value = 0
            for _ in 0..<width {
                let c = bytes[index]
                guard c >= 48, c <= 57 else { throw PGError.decoding(Date.self, pgText) }
                value = value * 10 + Int(c - 48)
                index += 1
            }
            return value
        }
        func expect(_ characters: String) throws {
            guard index < bytes.count, characters.utf8.contains(bytes[index]) else {
                throw PGError.decoding(Date.self, pgText)
            }
            index += 1
        }
        var parts = tm()
        parts.tm_year = Int32(try number(4) - 1900); try expect("-")
        parts.tm_mon = Int32(try number(2) - 1); try expect("-")
        parts.tm_mday = Int32(try number(2)); try expect(" T")
        parts.tm_hour = Int32(try number(2)); try expect(":")
        parts.tm_min = Int32(try number(2)); try expect(":")
        parts.tm_sec = Int32(try number(2))
        var fraction = 0.0
        if index < bytes.count, bytes[index] == UInt8(ascii: ".") {
            index += 1
            var scale = 0.1
            while index < bytes.count, bytes[index] >= 48, bytes[index] <= 57 {
                fraction += Double(bytes[index] - 48) * scale
                scale /= 10
                index += 1
            }
        }
        var offset = 0
        if index < bytes.count, bytes[index] == UInt8(ascii: "Z") {
            index += 1
        } else if index < bytes.count, bytes[index] == UInt8(ascii: "+") || bytes[index] == UInt8(ascii: "-") {
            let sign = bytes[index] == UInt8(ascii: "-") ? -1 : 1
            index += 1
            var seconds = try number(2) * 3600
            if index < bytes.count, bytes[index] == UInt8(ascii: ":") { index += 1; seconds += try number(2) * 60 }
            if index < bytes.count, bytes[index] == UInt8(ascii: ":") { index += 1; seconds += try number(2) }
            offset = sign * seconds
        }
        guard index == bytes.count else { throw PGError.decoding(Date.self, pgText) }
        let epoch = timegm(&parts)
        self = Date(timeIntervalSince1970: Double(epoch - offset) + fraction)
    }
}
