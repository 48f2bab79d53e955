import Glibc

/// A self-pipe that wakes a thread blocked in poll(): any thread signals, the waiter
/// drains. Non-blocking on both ends; a full pipe already means "wake up".
final class WakePipe: Sendable {
    let readFD: Int32
    let writeFD: Int32

    init() {
        var fds: [Int32] = [-1, -1]
        precondition(pipe(&fds) == 0, "pipe failed: errno \(errno)")
        for fd in fds {
            _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL, 0) | O_NONBLOCK)
            _ = fcntl(fd, F_SETFD, FD_CLOEXEC)
        }
        readFD = fds[0]
        writeFD = fds[1]
    }

    deinit {
        close(readFD)
        close(writeFD)
    }

    /// Wakes the waiter (idempotent until drained).
    func signal() {
        var byte: UInt8 = 1
        _ = write(writeFD, &byte, 1)
    }

    /// Empties the pipe after a wake-up.
    func drain() {
        var buffer = [UInt8](repeating: 0, count: 64)
        while read(readFD, &buffer, buffer.count) > 0 {}
    }

    /// Waits up to `timeoutMilliseconds` for a signal; true when signalled.
    func wait(timeoutMilliseconds: Int32) -> Bool {
        var fd = pollfd(fd: readFD, events: Int16(POLLIN), revents: 0)
        while true {
            let count = poll(&fd, 1, timeoutMilliseconds)
            if count < 0 && errno == EINTR { continue }
            return count > 0
        }
    }
}
