/// The agent's reason for asking (docs/protocol.md, "Consent"): shown to the person in the ping, the push
/// alert and the prompt as the agent's own words, so it is cleaned first: control
/// characters (CR, LF and TAB among them) and line separators become spaces, format
/// characters (the bidi controls U+202A-U+202E and U+2066-U+2069, zero-width ones) are
/// removed, runs of whitespace collapse to one space, and the ends are trimmed. At most
/// `maximumLength` Unicode scalar values may remain.
package enum LocateReason {
    /// The most Unicode scalar values a cleaned reason may have.
    package static let maximumLength = 120

    /// The answer to a reason that is too long (400 for `POST /v1/locate`, `isError` for MCP).
    package static let tooLongText = "reason must be at most \(maximumLength) characters after cleaning; shorten it."

    /// What a raw reason is.
    package enum Checked: Equatable {
        /// Usable: the cleaned text, or nil when nothing visible was given.
        case reason(String?)
        /// Longer than `maximumLength` after cleaning.
        case tooLong
    }

    /// Cleans and checks a raw reason (nil: none given).
    package static func check(_ raw: String?) -> Checked {
        guard let raw else { return .reason(nil) }
        let cleaned = clean(raw)
        if cleaned.unicodeScalars.count > maximumLength { return .tooLong }
        return .reason(cleaned.isEmpty ? nil : cleaned)
    }

    /// The cleaned text (possibly empty).
    package static func clean(_ raw: String) -> String {
        var scalars = String.UnicodeScalarView()
        var pendingSpace = false
        for scalar in raw.unicodeScalars {
            switch scalar.properties.generalCategory {
            case .format, .surrogate, .privateUse, .unassigned:
                continue  // invisible or meaningless: removed
            case .control, .lineSeparator, .paragraphSeparator:
                pendingSpace = !scalars.isEmpty
                continue
            default:
                if scalar.properties.isWhitespace {
                    pendingSpace = !scalars.isEmpty
                    continue
                }
            }
            if pendingSpace { scalars.append(" ") }
            pendingSpace = false
            scalars.append(scalar)
        }
        return String(scalars)
    }
}
