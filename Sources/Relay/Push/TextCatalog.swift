import Foundation
import JSON

/// The person-facing texts the relay writes itself — notification titles and bodies — from
/// the one catalog the browser phone uses too (`Resources/app/strings.json`: `{"en": {key:
/// text}, "de": {…}}`, `{name}` placeholders). A language it has no text in gets English.
struct TextCatalog: Sendable {
    /// The catalog built into the relay (empty if it cannot be read: every text is then its key).
    static let bundled = TextCatalog(contentsOf: Bundle.module.url(forResource: "app", withExtension: nil)?
        .appendingPathComponent("strings.json"))

    private let languages: [String: [String: String]]

    /// The catalog of a strings.json document.
    init(json: [UInt8]) {
        var languages: [String: [String: String]] = [:]
        if case .object(let byLanguage)? = JSONValue.parse(bytes: json) {
            for (language, texts) in byLanguage {
                guard case .object(let entries) = texts else { continue }
                languages[language] = entries.compactMapValues(\.string)
            }
        }
        self.languages = languages
    }

    /// The catalog in `url`'s file.
    init(contentsOf url: URL?) {
        self.init(json: url.flatMap { FileManager.default.contents(atPath: $0.path) }.map(Array.init) ?? [])
    }

    /// The text of `key` in `language` (English when that language lacks it), with each
    /// `{name}` replaced by `values[name]` in one pass: a value is never read as a template.
    func text(_ key: String, language: String, _ values: [String: String] = [:]) -> String {
        let template = languages[language]?[key] ?? languages["en"]?[key] ?? key
        var result = ""
        var rest = Substring(template)
        while let open = rest.firstIndex(of: "{"), let close = rest[open...].firstIndex(of: "}") {
            result += rest[..<open]
            let name = String(rest[rest.index(after: open)..<close])
            result += values[name] ?? String(rest[open...close])
            rest = rest[rest.index(after: close)...]
        }
        return result + rest
    }

    /// Whether the catalog has texts in `language`.
    func knows(_ language: String) -> Bool { languages[language] != nil }
}
