/// The fields of an `application/x-www-form-urlencoded` body or a query (WHATWG URL
/// §5.1): `&`-separated `name=value` pairs, `+` and `%XX` decoded. A name given twice
/// makes the whole form unreadable (RFC 6749 §3.1: "Request and response parameters MUST
/// NOT be included more than once"), and so do more than `maximumFields` fields.
public struct FormFields: Sendable, Equatable {
    /// Most fields a form may carry.
    public static let maximumFields = 32

    /// The decoded fields by name; a field without `=` has the empty value.
    public let values: [String: String]

    /// Reads `text`; nil when a name repeats or there are too many fields.
    public init?(_ text: Substring) {
        var values: [String: String] = [:]
        var readable = true
        Self.scan(text) { rawName, rawValue in
            let name = percentDecoded(rawName)
            guard values[name] == nil, values.count < Self.maximumFields else {
                readable = false
                return false
            }
            values[name] = rawValue.map(percentDecoded) ?? ""
            return true
        }
        guard readable else { return nil }
        self.values = values
    }

    /// Reads a body's bytes (UTF-8; bytes that are not become U+FFFD and so never match).
    public init?(body: [UInt8]) {
        self.init(Substring(String(decoding: body, as: UTF8.self)))
    }

    /// Calls `body` with each non-empty `&`-separated item of `text`, undecoded (its name, and
    /// its value when it has `=`), in order, until `body` returns false.
    static func scan(_ text: Substring, _ body: (Substring, Substring?) -> Bool) {
        var rest = text
        while !rest.isEmpty {
            let end = rest.firstIndex(of: "&") ?? rest.endIndex
            let item = rest[..<end]
            rest = end == rest.endIndex ? rest[end...] : rest[rest.index(after: end)...]
            guard !item.isEmpty else { continue }
            let equals = item.firstIndex(of: "=")
            guard body(item[..<(equals ?? item.endIndex)], equals.map { item[item.index(after: $0)...] }) else { return }
        }
    }

    /// The value of `name`, nil when absent.
    public subscript(name: String) -> String? { values[name] }
}
