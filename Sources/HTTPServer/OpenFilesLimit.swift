import Glibc

/// The process's open-files limit (RLIMIT_NOFILE), which bounds how many connections a
/// server can hold.
enum OpenFilesLimit {
    /// Raises the soft limit to the hard one (allowed without privileges) and returns the
    /// soft limit in force afterwards.
    static func raiseToHard() -> Int {
        var limit = rlimit()
        guard getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit) == 0 else { return 1024 }
        if limit.rlim_cur < limit.rlim_max {
            var raised = limit
            raised.rlim_cur = limit.rlim_max
            if setrlimit(Int32(RLIMIT_NOFILE.rawValue), &raised) == 0 { limit = raised }
        }
        return Int(clamping: min(limit.rlim_cur, rlim_t(Int32.max)))  // RLIM_INFINITY is all ones
    }
}
