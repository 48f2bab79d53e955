import Glibc

/// Failures of the server itself (binding, system calls), never of a client.
public enum HTTPServerError: Error, CustomStringConvertible {
    /// A system call failed with errno.
    case system(String, Int32)

    public var description: String {
        switch self {
        case .system(let call, let code): "\(call) failed: \(String(cString: strerror(code)))"
        }
    }
}
