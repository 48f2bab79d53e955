/// Header fields in the order received, with case-insensitive lookup.
public struct HTTPHeaders: Sendable, Sequence, ExpressibleByDictionaryLiteral {
    /// The fields as (name, value) pairs; names keep the case they were sent with.
    public private(set) var fields: [(name: String, value: String)] = []

    /// An empty set of headers.
    public init() {}

    /// An empty set of headers with room for `capacity` fields (a parsed request's count).
    public init(capacity: Int) {
        fields.reserveCapacity(capacity)
    }

    public init(dictionaryLiteral elements: (String, String)...) {
        fields = elements.map { (name: $0.0, value: $0.1) }
    }

    /// The first value of `name` (case-insensitive), or nil.
    public subscript(name: String) -> String? {
        fields.first { $0.name.caseInsensitiveEquals(name) }?.value
    }

    /// Every value of `name` (case-insensitive), in order.
    public func values(_ name: String) -> [String] {
        fields.filter { $0.name.caseInsensitiveEquals(name) }.map(\.value)
    }

    /// The first value of `name` (case-insensitive) and how many fields carry it, without
    /// gathering them (the parser's checks of Host and Content-Length on every request).
    public func first(_ name: String) -> (value: String?, count: Int) {
        var first: String?
        var count = 0
        for field in fields where field.name.caseInsensitiveEquals(name) {
            if count == 0 { first = field.value }
            count += 1
        }
        return (first, count)
    }

    /// Appends a field (a second field of the same name is kept as a second field).
    public mutating func add(_ name: String, _ value: String) {
        fields.append((name: name, value: value))
    }

    /// Replaces every field named `name` with one field.
    public mutating func set(_ name: String, _ value: String) {
        fields.removeAll { $0.name.caseInsensitiveEquals(name) }
        fields.append((name: name, value: value))
    }

    /// Whether a comma-separated header such as `Connection` lists `token` (case-insensitive).
    public func contains(_ name: String, token: String) -> Bool {
        values(name).contains { value in
            value.split(separator: ",").contains { $0.trimmingSpaces().caseInsensitiveEquals(token) }
        }
    }

    public func makeIterator() -> IndexingIterator<[(name: String, value: String)]> {
        fields.makeIterator()
    }
}

extension StringProtocol {
    /// ASCII case-insensitive equality (header names and tokens are ASCII).
    func caseInsensitiveEquals(_ other: some StringProtocol) -> Bool {
        let a = utf8, b = other.utf8
        guard a.count == b.count else { return false }
        return zip(a, b).allSatisfy { x, y in
            x == y || (x | 0x20 == y | 0x20 && (x | 0x20) >= 0x61 && (x | 0x20) <= 0x7a)
        }
    }

    /// Without leading and trailing spaces and tabs.
    func trimmingSpaces() -> Substring {
        var slice = Substring(self)
        while let first = slice.first, first == " " || first == "\t" { slice.removeFirst() }
        while let last = slice.last, last == " " || last == "\t" { slice.removeLast() }
        return slice
    }
}
