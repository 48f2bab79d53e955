import Foundation

/// Writes log lines to a file descriptor (standard error) from a thread of its own, through
/// a bounded buffer: whoever reads the logs — a terminal, journald, a pipe nobody drains —
/// can be slow or gone, and the relay's loop and task threads never wait for it. Past
/// `maximumPendingBytes` a line is dropped and counted (`dropped`, on /metrics), never queued.
///
/// A flood that makes the relay log (pushes, refusals) cannot stall it through its own log
/// lines: before, a full stderr pipe blocked every thread that logged, and the hang-ups of
/// waiting agents, handled on those threads, were lost.
public final class LogWriter: @unchecked Sendable {
    /// Bytes that may wait to be written.
    public static let maximumPendingBytes = 1 << 20

    /// The process's standard error (one writer: the descriptor is the process's).
    public static let standardError = LogWriter(fileDescriptor: 2)

    private let fileDescriptor: Int32
    private let condition = NSCondition()
    // Guarded by `condition`.
    private var pending: [String] = []
    private var pendingBytes = 0
    private var writing = false
    private var started = false
    private var droppedLines = 0

    /// A writer to `fileDescriptor` (its thread starts with the first line).
    public init(fileDescriptor: Int32) {
        self.fileDescriptor = fileDescriptor
    }

    /// Queues `line` (a newline is added); drops it when the buffer is full.
    public func write(_ line: String) {
        condition.lock()
        defer { condition.unlock() }
        let size = line.utf8.count + 1
        guard pendingBytes + size <= Self.maximumPendingBytes else {
            droppedLines += 1
            return
        }
        pending.append(line)
        pendingBytes += size
        if !started {
            started = true
            let thread = Thread { [self] in run() }
            thread.name = "log-writer"
            thread.start()
        }
        condition.signal()
    }

    /// Lines dropped because the buffer was full.
    public var dropped: Int {
        condition.lock()
        defer { condition.unlock() }
        return droppedLines
    }

    /// Waits until every queued line is written, or `timeout` passed (at exit): real time,
    /// the system's clock, as the writer's thread runs in it.
    public func flush(timeout: Duration = .seconds(2)) {
        let deadline = RelayClock.system.date.addingTimeInterval(timeout.seconds)
        condition.lock()
        defer { condition.unlock() }
        while !pending.isEmpty || writing {
            guard condition.wait(until: deadline) else { return }
        }
    }

    private func run() {
        while true {
            condition.lock()
            while pending.isEmpty { condition.wait() }
            let lines = pending
            pending = []
            pendingBytes = 0
            writing = true
            condition.unlock()
            var bytes: [UInt8] = []
            bytes.reserveCapacity(lines.reduce(0) { $0 + $1.utf8.count + 1 })
            for line in lines {
                bytes += line.utf8
                bytes.append(UInt8(ascii: "\n"))
            }
            writeAll(bytes)
            condition.lock()
            writing = false
            condition.broadcast()
            condition.unlock()
        }
    }

    private func writeAll(_ bytes: [UInt8]) {
        var offset = 0
        while offset < bytes.count {
            let written = bytes[offset...].withUnsafeBytes { Glibc.write(fileDescriptor, $0.baseAddress, $0.count) }
            if written < 0 {
                if errno == EINTR || errno == EAGAIN { continue }
                return  // the reader is gone: nothing more can be written
            }
            offset += written
        }
    }
}
