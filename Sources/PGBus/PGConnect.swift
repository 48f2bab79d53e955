import CLibPQ
import Foundation

/// Opening libpq connections. `PQconnectdbParams` may look a host name up and waits for
/// the TLS handshake, so it never runs on an event loop: pool connections are opened on a
/// short-lived thread of their own and then handed to their loop; the listener opens its
/// own on its thread.
enum PGConnect {
    /// Opens a libpq connection in non-blocking mode, blocking the calling thread for at
    /// most the connect timeout. Server notices are dropped: they can quote data, and
    /// nothing here reads them.
    static func openHandle(_ configuration: PGConfiguration) throws -> OpaquePointer {
        let parameters = configuration.libpqParameters
        let handle = withCStringArray(parameters.map(\.0)) { keys in
            withCStringArray(parameters.map(\.1)) { values in PQconnectdbParams(keys, values, 1) }
        }
        guard let handle else { throw PGError(.connectionFailed, detail: "out of memory") }
        guard PQstatus(handle) == CONNECTION_OK else {
            let error = PGSocket.connectionError(handle)
            PQfinish(handle)
            throw PGError(.connectionFailed, detail: error.detail)
        }
        PQsetNoticeProcessor(handle, { _, _ in }, nil)
        PQsetnonblocking(handle, 1)
        return handle
    }

    /// Opens a connection on a new thread and returns it when it is ready.
    static func openOffLoop(_ configuration: PGConfiguration) async throws -> OwnedHandle {
        try await withCheckedThrowingContinuation { continuation in
            let thread = Thread {
                continuation.resume(with: Result { OwnedHandle(pointer: try openHandle(configuration)) })
            }
            thread.name = "pgbus-connect"
            thread.stackSize = 1 << 20
            thread.start()
        }
    }

    /// A libpq handle travelling between threads (only one uses it at a time).
    struct OwnedHandle: @unchecked Sendable {
        let pointer: OpaquePointer
    }
}

/// Calls `body` with a NULL-terminated array of C strings.
func withCStringArray<R>(_ strings: [String], _ body: (UnsafePointer<UnsafePointer<CChar>?>) -> R) -> R {
    withOptionalCStringArray(strings.map(Optional.some) + [nil], body)
}

/// Calls `body` with an array of C strings where nil stays a NULL pointer (valid only during
/// the call). The strings are copied, each NUL-terminated, into one temporary buffer and
/// the pointers into another (on the stack while they are small): a statement's parameters
/// cost no allocation each (they cost two or three each before, counted with a malloc uprobe).
func withOptionalCStringArray<R>(_ strings: [String?], _ body: (UnsafePointer<UnsafePointer<CChar>?>) -> R) -> R {
    let size = strings.reduce(0) { $0 + ($1.map { $0.utf8.count + 1 } ?? 0) }
    return withUnsafeTemporaryAllocation(of: CChar.self, capacity: max(1, size)) { bytes in
        withUnsafeTemporaryAllocation(of: UnsafePointer<CChar>?.self, capacity: max(1, strings.count)) { pointers in
            var offset = 0
            for (index, string) in strings.enumerated() {
                guard let string else {
                    pointers[index] = nil
                    continue
                }
                pointers[index] = UnsafePointer(bytes.baseAddress! + offset)
                for byte in string.utf8 {
                    bytes[offset] = CChar(bitPattern: byte)
                    offset += 1
                }
                bytes[offset] = 0
                offset += 1
            }
            return body(pointers.baseAddress!)
        }
    }
}
