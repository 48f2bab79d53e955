/// A small YAML 1.2 writer for documents the relay publishes (docs/openapi.yaml): ordered
/// maps, lists and scalars. Every string is written double-quoted with JSON escapes, which
/// YAML reads the same, so no value can change the document's structure.
indirect enum YAML: Sendable {
    case map([(String, YAML)])
    case list([YAML])
    case string(String)
    case int(Int)
    case bool(Bool)

    /// The document text, ending with a newline.
    var text: String {
        var out = ""
        write(to: &out, indent: 0, inList: false)
        return out
    }

    private func write(to out: inout String, indent: Int, inList: Bool) {
        let pad = String(repeating: " ", count: indent)
        switch self {
        case .map(let entries):
            for (index, (key, value)) in entries.enumerated() {
                let prefix = inList && index == 0 ? "" : pad
                out += prefix + Self.key(key) + ":"
                value.writeValue(to: &out, indent: indent + 2)
            }
        case .list(let items):
            for item in items {
                out += pad + "- "
                switch item {
                case .map, .list: item.write(to: &out, indent: indent + 2, inList: true)
                default: out += item.scalar + "\n"
                }
            }
        default:
            out += pad + scalar + "\n"
        }
    }

    private func writeValue(to out: inout String, indent: Int) {
        switch self {
        case .map(let entries) where entries.isEmpty: out += " {}\n"
        case .list(let items) where items.isEmpty: out += " []\n"
        case .map, .list:
            out += "\n"
            write(to: &out, indent: indent, inList: false)
        default:
            out += " " + scalar + "\n"
        }
    }

    private var scalar: String {
        switch self {
        case .string(let text): Self.quoted(text)
        case .int(let value): String(value)
        case .bool(let value): value ? "true" : "false"
        case .map, .list: ""
        }
    }

    /// Keys made only of safe characters stay plain; others are quoted.
    private static func key(_ key: String) -> String {
        let plain = !key.isEmpty && key.allSatisfy { $0.isASCII && ($0.isLetter || $0.isNumber || "_-./{}".contains($0)) }
            && !(key.first!.isNumber && key.allSatisfy(\.isNumber))
        return plain && !key.hasPrefix("/") ? key : quoted(key)
    }

    private static func quoted(_ text: String) -> String {
        var out = "\""
        for scalar in text.unicodeScalars {
            switch scalar {
            case "\"": out += "\\\""
            case "\\": out += "\\\\"
            case "\n": out += "\\n"
            case _ where scalar.value < 0x20: out += "\\u" + String(scalar.value, radix: 16).leftPadded(to: 4)
            default: out.unicodeScalars.append(scalar)
            }
        }
        return out + "\""
    }
}

private extension String {
    func leftPadded(to length: Int) -> String { String(repeating: "0", count: max(0, length - count)) + self }
}
