import Foundation
import JSON

extension JSONValue {
    /// The string as a UUID, if it is one.
    var uuid: UUID? { string.flatMap(UUIDText.parse) }
}
