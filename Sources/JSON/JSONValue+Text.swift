/// Writing a JSON value: compact, object keys sorted (so equal values give equal text),
/// strings escaped as RFC 8259 requires with `/` left alone, numbers as `JSONText.number`
/// writes them (a non-finite number, which JSON cannot hold, as `null`).
extension JSONValue {
    /// The value as compact JSON text.
    public var text: String {
        // Room for the common payload (a ping, a fix, a notification) at once, rather than
        // growing the text through 16, 32, 64… bytes as it is written.
        var out = ""
        if case .object = self { out.reserveCapacity(Self.expectedTextSize) } else if case .array = self {
            out.reserveCapacity(Self.expectedTextSize)
        }
        write(to: &out)
        return out
    }

    /// The room a text starts with (most payloads the relay writes fit).
    static let expectedTextSize = 256

    /// The value as UTF-8 JSON bytes.
    public var bytes: [UInt8] { Array(text.utf8) }

    /// Appends the value's JSON text to `out`.
    public func write(to out: inout String) {
        switch self {
        case .null: out += "null"
        case .bool(let value): out += value ? "true" : "false"
        case .number(let value): out += JSONText.number(value)
        case .string(let value): JSONText.appendQuoted(value, to: &out)
        case .array(let elements):
            out += "["
            for (index, element) in elements.enumerated() {
                if index > 0 { out += "," }
                element.write(to: &out)
            }
            out += "]"
        case .object(let members):
            out += "{"
            for (index, key) in members.keys.sorted().enumerated() {
                if index > 0 { out += "," }
                JSONText.appendQuoted(key, to: &out)
                out += ":"
                members[key]!.write(to: &out)
            }
            out += "}"
        }
    }

    /// Parses UTF-8 bytes (a body, a decoded JWT part); nil for invalid UTF-8 or anything
    /// `parse(_:)` refuses.
    public static func parse(bytes: some Collection<UInt8>) -> JSONValue? {
        String(validating: bytes, as: UTF8.self).flatMap(parse)
    }

    /// The elements, if this is an array.
    public var array: [JSONValue]? {
        if case .array(let elements) = self { elements } else { nil }
    }

    /// The member `key` decoded by `decode`: `.some(nil)` when it is absent or null, nil
    /// when it is there but `decode` refuses it (a malformed field, not a missing one).
    public func optionalMember<T>(_ key: String, _ decode: (JSONValue) -> T?) -> T?? {
        guard let value = self[key], !value.isNull else { return .some(nil) }
        return decode(value).map { .some($0) }
    }

    /// The members, if this is an object.
    public var object: [String: JSONValue]? {
        if case .object(let members) = self { members } else { nil }
    }
}
