/// One-dimensional arrays (`text[]`, `uuid[]`, `int[]`, ...) in PostgreSQL's text format.
///
/// Every element is written double-quoted with `\` and `"` escaped, so any text round-trips;
/// nil elements are NULL. Nested arrays are not supported.
extension Array: PGEncodable where Element: PGEncodable {
    public var pgText: String {
        var out = "{"
        for (position, element) in enumerated() {
            if position > 0 { out += "," }
            guard let text = element.pgParameter else {
                out += "NULL"
                continue
            }
            out += "\""
            for character in text {
                if character == "\"" || character == "\\" { out += "\\" }
                out.append(character)
            }
            out += "\""
        }
        return out + "}"
    }
}

extension Array: PGDecodable where Element: PGDecodable {
    public init(pgText: String) throws {
        self = try PGArrayParser.elements(of: pgText).map { element in
            guard let element else {
                throw PGError(.decoding, detail: "NULL element in an array of non-optional \(Element.self)")
            }
            return try Element(pgText: element)
        }
    }
}

/// Splits the text form of a one-dimensional array into its elements (nil for NULL).
enum PGArrayParser {
    static func elements(of text: String) throws -> [String?] {
        var characters = Substring(text)
        // An array with explicit bounds, like [0:1]={a,b}, starts with its dimensions.
        if characters.first == "[", let equals = characters.firstIndex(of: "=") {
            characters = characters[characters.index(after: equals)...]
        }
        guard characters.first == "{", characters.last == "}" else {
            throw PGError(.decoding, detail: "not an array literal")
        }
        characters = characters.dropFirst().dropLast()
        var elements: [String?] = []
        if characters.isEmpty { return elements }
        var index = characters.startIndex
        while true {
            var value = ""
            var quoted = false
            if index < characters.endIndex, characters[index] == "\"" {
                quoted = true
                index = characters.index(after: index)
                while true {
                    guard index < characters.endIndex else { throw PGError(.decoding, detail: "unterminated quote") }
                    let c = characters[index]
                    if c == "\\" {
                        index = characters.index(after: index)
                        guard index < characters.endIndex else { throw PGError(.decoding, detail: "dangling escape") }
                        value.append(characters[index])
                    } else if c == "\"" {
                        index = characters.index(after: index)
                        break
                    } else {
                        value.append(c)
                    }
                    index = characters.index(after: index)
                }
            } else {
                while index < characters.endIndex, characters[index] != "," {
                    if characters[index] == "{" { throw PGError(.decoding, detail: "nested arrays are not supported") }
                    value.append(characters[index])
                    index = characters.index(after: index)
                }
            }
            elements.append(!quoted && value.uppercased() == "NULL" ? nil : value)
            if index == characters.endIndex { break }
            guard characters[index] == "," else { throw PGError(.decoding, detail: "expected a comma") }
            index = characters.index(after: index)
        }
        return elements
    }
}
