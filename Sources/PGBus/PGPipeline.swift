import CLibPQ
import CSystem
import Loop
import Synchronization

/// One libpq connection in pipeline mode, driven by an event loop: statements are sent as
/// soon as they arrive (those that arrive in one loop iteration go out in one write), each
/// followed by a sync so that a failing statement fails alone, and their results are read
/// when the socket is readable. Each distinct SQL text is prepared once per connection
/// (up to `maximumPrepared`), so the server parses and plans it only the first time.
///
/// Every statement has a deadline (`callTimeout`, counted from when it was sent): if the
/// oldest statement in flight has no answer by then, the server is presumed hung and the
/// connection is abandoned — closed at once, every statement on it failed with `timedOut`
/// — so no caller waits on a server that stopped answering with its socket still open.
///
/// Everything here runs on the loop thread, except `cancelHandle` and `runningID`, which
/// the canceller thread reads.
final class PGPipeline: EventLoopSource, @unchecked Sendable {
    /// Distinct statements prepared per connection; later ones run unnamed.
    static let maximumPrepared = 256

    let loop: EventLoop
    /// How long a sent statement may go unanswered (nil: forever).
    private let callTimeout: Duration?
    /// Armed while statements are in flight: checks the oldest one's deadline.
    private var deadlineTimer: LoopTimer?
    private var handle: OpaquePointer?
    private var fd: Int32 = -1
    private var token: UInt64?
    private var queued: [PGStatement] = []
    private var inFlight: [PGStatement] = []
    private var inFlightStart = 0
    private var prepared: [String: String] = [:]
    private var flushScheduled = false
    private var writing = false
    /// Set by `closeWhenIdle`: called once the last statement has finished.
    private var onIdle: (() -> Void)?
    /// Whether the connection can take statements; false once broken or closed.
    let usable = Atomic<Bool>(true)
    /// PQcancel's handle and the statement the server works on now (for the canceller).
    let cancelState = Mutex<(handle: CancelHandle?, running: ObjectIdentifier?)>((nil, nil))

    /// PQgetCancel's handle, freed with the last reference.
    final class CancelHandle: @unchecked Sendable {
        let pointer: OpaquePointer
        init(_ pointer: OpaquePointer) { self.pointer = pointer }
        deinit { PQfreeCancel(pointer) }
    }

    init(loop: EventLoop, callTimeout: Duration? = nil) {
        self.loop = loop
        self.callTimeout = callTimeout
    }

    /// Takes over an open connection (loop thread): pipeline mode, its socket on the loop.
    func attach(_ connection: OpaquePointer) throws {
        guard PQenterPipelineMode(connection) == 1 else {
            PQfinish(connection)
            throw PGError(.connectionFailed, detail: "pipeline mode refused")
        }
        handle = connection
        fd = PQsocket(connection)
        cancelState.withLock { $0.handle = PQgetCancel(connection).map(CancelHandle.init) }
        do {
            token = try loop.register(fd, events: WB_EPOLLIN, source: self)
        } catch {
            fail(PGError(.connectionFailed, detail: "\(error)"))
            throw PGError(.connectionFailed, detail: "\(error)")
        }
    }

    // MARK: Sending

    /// Queues a statement; it goes out with the others of this loop iteration (loop thread).
    func submit(_ statement: PGStatement) {
        guard handle != nil, onIdle == nil else {
            statement.finish(.failure(PGError(.connectionClosed, detail: "connection closed")))
            return
        }
        queued.append(statement)
        guard !flushScheduled else { return }
        flushScheduled = true
        loop.execute { [self] in
            flushScheduled = false
            send()
        }
    }

    private func send() {
        guard let handle else { return }
        let now = loop.now
        for statement in queued {
            if statement.cancelled.load(ordering: .relaxed) {
                statement.finish(.failure(CancellationError()))
                continue
            }
            guard enqueue(statement, on: handle) else {
                fail(PGSocket.connectionError(handle))
                return
            }
            if inFlight.count == inFlightStart { markRunning(statement) }
            statement.sentAt = now
            inFlight.append(statement)
        }
        queued.removeAll(keepingCapacity: true)
        flush()
        armDeadline()
    }

    // MARK: Deadlines

    /// Arms the deadline check for the oldest statement in flight, unless one is armed.
    private func armDeadline() {
        guard let callTimeout, deadlineTimer == nil, inFlightStart < inFlight.count,
              let sent = inFlight[inFlightStart].sentAt else { return }
        let delay = max(.zero, sent + callTimeout - loop.now)
        deadlineTimer = loop.schedule(after: delay) { [weak self] in self?.deadlinePassed() }
    }

    /// The oldest statement's deadline came (loop thread): abandon the connection if it
    /// still has no answer, else look at the next one's.
    private func deadlinePassed() {
        deadlineTimer = nil
        guard let callTimeout, inFlightStart < inFlight.count, let sent = inFlight[inFlightStart].sentAt else { return }
        if loop.now - sent >= callTimeout {
            fail(PGError(.timedOut, detail: "no answer within \(callTimeout)"))
        } else {
            armDeadline()
        }
    }

    /// Puts one statement, its preparation if new, and a sync into libpq's buffer.
    private func enqueue(_ statement: PGStatement, on handle: OpaquePointer) -> Bool {
        let count = Int32(statement.parameters.count)
        var name = prepared[statement.sql]
        if name == nil, prepared.count < Self.maximumPrepared {
            let fresh = "pgbus_\(prepared.count + 1)"
            guard PQsendPrepare(handle, fresh, statement.sql, count, nil) == 1 else { return false }
            prepared[statement.sql] = fresh
            statement.phase = .prepare
            name = fresh
        }
        let sent = withOptionalCStringArray(statement.parameters) { values in
            if let name {
                PQsendQueryPrepared(handle, name, count, values, nil, nil, 0)
            } else {
                PQsendQueryParams(handle, statement.sql, count, nil, values, nil, nil, 0)
            }
        }
        return sent == 1 && PQpipelineSync(handle) == 1
    }

    /// Writes what libpq has buffered; watches for writability while some is left.
    private func flush() {
        guard let handle, let token else { return }
        let flushed = PQflush(handle)
        if flushed < 0 {
            fail(PGSocket.connectionError(handle))
            return
        }
        let needWrite = flushed == 1
        if needWrite != writing {
            writing = needWrite
            loop.modify(fd, token: token, events: needWrite ? WB_EPOLLIN | WB_EPOLLOUT : WB_EPOLLIN)
        }
    }

    // MARK: Receiving

    func handle(events: UInt32) {
        guard let handle else { return }
        if events & WB_EPOLLOUT != 0 { flush() }
        guard events & (WB_EPOLLIN | WB_EPOLLERR | WB_EPOLLHUP) != 0 else { return }
        if PQconsumeInput(handle) == 0 {
            fail(PGSocket.connectionError(handle))
            return
        }
        while let notification = PQnotifies(handle) { PQfreemem(notification) }  // nobody LISTENs here
        readResults(handle)
        if PQstatus(handle) != CONNECTION_OK { fail(PGSocket.connectionError(handle)) }
    }

    private func readResults(_ handle: OpaquePointer) {
        while inFlightStart < inFlight.count, PQisBusy(handle) == 0 {
            let statement = inFlight[inFlightStart]
            let result = PQgetResult(handle)
            switch statement.phase {
            case .prepare:
                if let result {
                    if let error = PGSocket.resultError(result) {
                        statement.failure = statement.failure ?? error
                        prepared[statement.sql] = nil  // not prepared after all
                    }
                    PQclear(result)
                } else {
                    statement.phase = .query
                }
            case .query:
                if let result {
                    take(result, for: statement)
                } else {
                    statement.phase = .sync
                }
            case .sync:
                let status = result.map(PQresultStatus)
                if let result { PQclear(result) }
                guard status == PGRES_PIPELINE_SYNC else {
                    fail(PGError(.protocolViolation, detail: "expected the end of a statement"))
                    return
                }
                complete(statement)
            }
        }
        if inFlightStart > 64, inFlightStart * 2 > inFlight.count {
            inFlight.removeFirst(inFlightStart)
            inFlightStart = 0
        }
    }

    private func take(_ result: OpaquePointer, for statement: PGStatement) {
        defer { PQclear(result) }
        if PQresultStatus(result) == PGRES_PIPELINE_ABORTED {
            statement.failure = statement.failure ?? PGError(.server, sqlState: "25P02", detail: "pipeline aborted")
        } else if let error = PGSocket.resultError(result) {
            statement.failure = statement.failure ?? error
        } else if statement.failure == nil {
            statement.result = PGSocket.decode(result)
        }
    }

    private func complete(_ statement: PGStatement) {
        inFlightStart += 1
        if inFlightStart < inFlight.count {
            markRunning(inFlight[inFlightStart])
        } else {
            markRunning(nil)
        }
        if let failure = statement.failure {
            if failure.isQueryCanceled, statement.cancelled.load(ordering: .relaxed) {
                statement.finish(.failure(CancellationError()))
            } else {
                statement.finish(.failure(failure))
            }
        } else if let result = statement.result {
            statement.finish(.success(result))
        } else {
            statement.finish(.failure(PGError(.protocolViolation, detail: "no result")))
        }
        closeIfIdle()
    }

    // MARK: Cancelling and closing

    /// Records which statement the server works on now; a cancelled one is cancelled at once.
    private func markRunning(_ statement: PGStatement?) {
        cancelState.withLock { $0.running = statement.map(ObjectIdentifier.init) }
        if let statement, statement.cancelled.load(ordering: .relaxed) { requestCancel(statement) }
    }

    /// The waiting task was cancelled (loop thread): a queued statement is dropped; a sent
    /// one is cancelled on the server once it is the one running.
    func cancel(_ statement: PGStatement) {
        if let index = queued.firstIndex(where: { $0 === statement }) {
            queued.remove(at: index)
            statement.finish(.failure(CancellationError()))
            return
        }
        if inFlightStart < inFlight.count, inFlight[inFlightStart] === statement { requestCancel(statement) }
    }

    /// Asks the server to cancel `statement`, the one running (loop thread). A cancel request
    /// that reaches the backend between two statements of the pipeline — it has sent the
    /// previous result and not yet started this one — is dropped by the server (it cancels
    /// only a running query), so while the statement is still the one running the request
    /// goes again, up to `cancelAttempts` times, `cancelRetryDelay` apart.
    private func requestCancel(_ statement: PGStatement, attempt: Int = 1) {
        guard attempt > 1 || !statement.cancelRequested else { return }
        statement.cancelRequested = true
        let id = ObjectIdentifier(statement)
        PGPipeline.canceller.submit { [self] in
            cancelState.withLock { state in
                guard state.running == id, let handle = state.handle else { return }
                var buffer = [CChar](repeating: 0, count: 256)
                _ = PQcancel(handle.pointer, &buffer, Int32(buffer.count))
            }
        }
        guard attempt < Self.cancelAttempts else { return }
        _ = loop.schedule(after: Self.cancelRetryDelay) { [weak self] in
            guard let self, inFlightStart < inFlight.count, inFlight[inFlightStart] === statement else { return }
            requestCancel(statement, attempt: attempt + 1)
        }
    }

    /// How many cancel requests one statement gets at most, and how far apart.
    static let cancelAttempts = 5
    static let cancelRetryDelay: Duration = .milliseconds(200)

    /// The thread that sends cancel requests: PQcancel opens a new TCP connection to the
    /// server and waits for it, so it never runs on a loop. One for the process: cancels
    /// are rare and short.
    static let canceller = PGWorker(name: "pgbus-cancel")

    /// Fails everything waiting and closes the connection (loop thread).
    func fail(_ error: PGError) {
        usable.store(false, ordering: .relaxed)
        let waiting = Array(inFlight[inFlightStart...]) + queued
        inFlight.removeAll()
        inFlightStart = 0
        queued.removeAll()
        close()
        for statement in waiting { statement.finish(.failure(error)) }
    }

    /// Closes the connection once the statements sent or queued have finished, then calls
    /// `done` (loop thread); later statements are refused.
    func closeWhenIdle(_ done: @escaping () -> Void) {
        let previous = onIdle
        onIdle = { previous?(); done() }
        closeIfIdle()
    }

    private func closeIfIdle() {
        guard let onIdle, inFlightStart == inFlight.count, queued.isEmpty else { return }
        self.onIdle = nil
        close()
        onIdle()
    }

    /// Closes the connection (loop thread); statements still waiting fail.
    func close() {
        usable.store(false, ordering: .relaxed)
        deadlineTimer?.cancel()
        deadlineTimer = nil
        if let token { loop.deregister(fd, token: token) }
        token = nil
        cancelState.withLock { $0 = (nil, nil) }
        if let handle { PQfinish(handle) }
        handle = nil
        if inFlightStart < inFlight.count || !queued.isEmpty { fail(PGError(.connectionClosed, detail: "connection closed")) }
        if let onIdle {
            self.onIdle = nil
            onIdle()
        }
    }
}
