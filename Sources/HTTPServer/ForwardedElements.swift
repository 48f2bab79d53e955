/// The `Forwarded` header's grammar (RFC 7239 §4): a comma-separated list of elements,
/// each a semicolon-separated list of `name=value` pairs whose value is a token or a
/// quoted string (RFC 9110 §5.6: `\` escapes in quotes). Read left to right.
enum ForwardedElements {
    /// One `name=value` pair, the value unquoted.
    struct Pair: Equatable {
        let name: Substring
        let value: Substring
    }

    /// The elements, or nil when the bytes break the grammar. Empty list elements are
    /// skipped (RFC 9110 §5.6.1).
    static func parse(_ bytes: [UInt8]) -> [[Pair]]? {
        var elements: [[Pair]] = []
        var pairs: [Pair] = []
        var index = 0
        func skipSpaces() { while index < bytes.count, bytes[index] == 0x20 || bytes[index] == 0x09 { index += 1 } }
        while true {
            skipSpaces()
            if index == bytes.count || bytes[index] == UInt8(ascii: ",") {
                guard pairs.isEmpty else { return nil }  // "for=a;" then nothing
                if index == bytes.count { return elements }
                index += 1
                continue
            }
            let nameStart = index
            while index < bytes.count, isTokenCharacter(bytes[index]) { index += 1 }
            guard index > nameStart, index < bytes.count, bytes[index] == UInt8(ascii: "=") else { return nil }
            let name = text(bytes[nameStart..<index])
            index += 1
            let value: Substring
            if index < bytes.count, bytes[index] == UInt8(ascii: "\"") {
                index += 1
                var unquoted: [UInt8] = []
                while true {
                    guard index < bytes.count else { return nil }  // an unterminated quote
                    let byte = bytes[index]
                    index += 1
                    if byte == UInt8(ascii: "\"") { break }
                    if byte == UInt8(ascii: "\\") {
                        guard index < bytes.count, isQuotable(bytes[index]) else { return nil }
                        unquoted.append(bytes[index])
                        index += 1
                    } else {
                        guard isQuotable(byte) else { return nil }
                        unquoted.append(byte)
                    }
                }
                value = text(unquoted[...])
            } else {
                let start = index
                while index < bytes.count, isTokenCharacter(bytes[index]) { index += 1 }
                guard index > start else { return nil }
                value = text(bytes[start..<index])
            }
            pairs.append(Pair(name: name, value: value))
            skipSpaces()
            if index < bytes.count, bytes[index] == UInt8(ascii: ";") {
                index += 1
                continue
            }
            guard index == bytes.count || bytes[index] == UInt8(ascii: ",") else { return nil }
            elements.append(pairs)
            pairs = []
            guard elements.count <= ForwardedFor.maximumHops else { return nil }
        }
    }

    private static func text(_ bytes: ArraySlice<UInt8>) -> Substring {
        Substring(decoding: bytes, as: UTF8.self)
    }

    /// RFC 9110 tchar.
    private static func isTokenCharacter(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "0")...UInt8(ascii: "9"):
            return true
        default:
            return "!#$%&'*+-.^_`|~".utf8.contains(byte)
        }
    }

    /// qdtext and quoted-pair characters: visible ASCII, space and tab (no obs-text).
    private static func isQuotable(_ byte: UInt8) -> Bool {
        byte == 0x09 || (byte >= 0x20 && byte < 0x7F)
    }
}
