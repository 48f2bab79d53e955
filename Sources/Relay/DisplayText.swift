import Foundation

/// Text a peer chose (device names, display names) made safe to show to others: control
/// and format characters (newlines, bidi overrides, zero-width joiners) are removed,
/// surrounding whitespace trimmed, and the result cut to a maximum number of characters.
public enum DisplayText {
    /// The cleaned, cut text.
    public static func clean(_ text: String, maximumLength: Int) -> String {
        var scalars = String.UnicodeScalarView()
        for scalar in text.unicodeScalars {
            switch scalar.properties.generalCategory {
            case .control, .format, .lineSeparator, .paragraphSeparator, .surrogate, .privateUse, .unassigned:
                continue
            default:
                scalars.append(scalar)
            }
        }
        let trimmed = String(scalars).trimmingCharacters(in: .whitespaces)
        return String(trimmed.prefix(maximumLength))
    }
}
