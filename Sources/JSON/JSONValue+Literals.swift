/// JSON written as Swift literals (`["content": [["type": "text", "text": .string(text)]]]`),
/// and values made from Swift ones. There is deliberately no `nil` literal: `nil` stays
/// Swift's "no value" (an optional's), and JSON's null is spelled `.null`.
extension JSONValue: ExpressibleByStringLiteral, ExpressibleByIntegerLiteral, ExpressibleByFloatLiteral,
    ExpressibleByBooleanLiteral, ExpressibleByArrayLiteral, ExpressibleByDictionaryLiteral {
    /// A string literal.
    public init(stringLiteral value: String) { self = .string(value) }
    /// An integer literal.
    public init(integerLiteral value: Int) { self = .number(Double(value)) }
    /// A floating-point literal.
    public init(floatLiteral value: Double) { self = .number(value) }
    /// `true` or `false`.
    public init(booleanLiteral value: Bool) { self = .bool(value) }
    /// An array literal.
    public init(arrayLiteral elements: JSONValue...) { self = .array(elements) }
    /// An object literal; a repeated key keeps its last value.
    public init(dictionaryLiteral elements: (String, JSONValue)...) {
        self = .object(Dictionary(elements, uniquingKeysWith: { _, last in last }))
    }

    /// A string, or `null` for nil.
    public init(_ value: String?) { self = value.map(JSONValue.string) ?? .null }
    /// An integer, or `null` for nil (exact up to 2^53, as JSON readers take numbers).
    public init(_ value: Int?) { self = value.map { .number(Double($0)) } ?? .null }
    /// An integer, or `null` for nil.
    public init(_ value: Int64?) { self = value.map { .number(Double($0)) } ?? .null }
    /// A number, or `null` for nil.
    public init(_ value: Double?) { self = value.map(JSONValue.number) ?? .null }
    /// A boolean, or `null` for nil.
    public init(_ value: Bool?) { self = value.map(JSONValue.bool) ?? .null }
}
