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
        var rest = text
        while !rest.isEmpty {
            let end = rest.firstIndex(of: "&") ?? rest.endIndex
            let item = rest[..<end]
            rest = end == rest.endIndex ? rest[end...] : rest[rest.index(after: end)...]
            guard !item.isEmpty else { continue }
            let equals = item.firstIndex(of: "=")
            let name = percentDecoded(item[..<(equals ?? item.endIndex)])
            guard values[name] == nil, values.count < Self.maximumFields else { return nil }
            values[name] = equals.map { percentDecoded(item[item.index(after: $0)...]) } ?? ""
        }
        self.values = values
    }

    /// Reads a body's bytes (UTF-8; bytes that are not become U+FFFD and so never match).
    public init?(body: [UInt8]) {
        self.init(Substring(String(decoding: body, as: UTF8.self)))
    }

    /// The value of `name`, nil when absent.
    public subscript(name: String) -> String? { values[name] }
}
