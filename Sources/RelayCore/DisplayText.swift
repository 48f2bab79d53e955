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
        return String(trimmingBlanks(Substring(String(scalars))).prefix(maximumLength))
    }

    /// `text` without the spaces and tabs around it (and the other horizontal spaces that
    /// Foundation's `.whitespaces` holds), without bridging to NSString.
    public static func trimmingBlanks(_ text: Substring) -> Substring {
        func isBlank(_ scalar: Unicode.Scalar) -> Bool {
            scalar == " " || scalar == "\t" || (scalar.value >= 0x80 && scalar.properties.generalCategory == .spaceSeparator)
        }
        let scalars = text.unicodeScalars
        guard let first = scalars.firstIndex(where: { !isBlank($0) }),
              let last = scalars.lastIndex(where: { !isBlank($0) }) else { return "" }
        return Substring(scalars[first...last])
    }
}
