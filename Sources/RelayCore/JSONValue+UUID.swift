import Foundation
import JSON

extension JSONValue {
    /// The string as a UUID, if it is one.
    package var uuid: UUID? { string.flatMap(UUIDText.parse) }
}
