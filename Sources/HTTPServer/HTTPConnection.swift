import CSystem
import Glibc
import Loop

/// One client connection, confined to the event loop's thread: HTTP/1.1 with pipelining
/// answered in order, then possibly a WebSocket.
///
/// The connection does the I/O — reading, parsing, writing, epoll interest, its one timer —
/// and `ConnectionStateMachine` decides: it is told what happened and returns what to do.
/// Handler calls run as tasks owned by the connection; a client that hangs up cancels them.
final class HTTPConnection: EventLoopSource, LoopDeadlineOwner, @unchecked Sendable {
    /// Items waiting to be answered, in order.
    private enum Pending {
        case request(HTTPRequest)
        case failure(status: Int)
    }

    let fd: Int32
    /// The client's IP address (for the handler, e.g. rate limits per client): the peer's,
    /// or the one a trusted proxy's PROXY header names.
    private(set) var remoteAddress: String
    /// Until the first bytes show whether a PROXY header comes: what arrived so far.
    private var proxyPrelude: [UInt8]? = []
    /// Whether the peer is a trusted proxy (its PROXY header is believed).
    private let viaTrustedProxy: Bool
    private(set) var token: UInt64 = 0
    private unowned let server: HTTPServerCore
    private var machine: ConnectionStateMachine
    /// The handler (or stream producer) task of the request being answered.
    private var inFlight: Task<Void, Never>?
    /// The WebSocket side, once upgraded and until closed.
    private(set) var webSocketSession: WebSocketSession?
    private var parser: HTTPRequestParser
    private var pending: [Pending] = []
    private var outbound = OutboundQueue()
    /// Where the loop keeps the connection's one deadline (its earliest; see `armTimer`).
    var deadlineSlot = -1
    /// Whether this connection was upgraded (for the server's WebSocket count).
    var wasWebSocket = false

    var serverCore: HTTPServerCore { server }

    init(fd: Int32, remoteAddress: String, server: HTTPServerCore, now: ContinuousClock.Instant, viaTrustedProxy: Bool = false) {
        self.fd = fd
        self.viaTrustedProxy = viaTrustedProxy
        self.remoteAddress = remoteAddress
        self.server = server
        self.parser = HTTPRequestParser(limits: server.limits)
        let limits = server.limits
        self.machine = ConnectionStateMachine(timeouts: .init(headerRead: limits.headerReadTimeout, idle: limits.idleTimeout,
                                                              linger: limits.lingerTimeout, maxLingerBytes: limits.maxLingerBytes),
                                              now: now)
    }

    func register() throws {
        token = try server.loop.register(fd, events: WB_EPOLLIN | WB_EPOLLRDHUP, source: self)
        // A new connection's first deadline is its request head's (its first bytes come
        // now): the timer armed here is the one they need, not an idle one they replace.
        arm(at: server.now + server.limits.headerReadTimeout)
    }

    var isClosed: Bool { machine.isClosed }

    // MARK: - Events

    func handle(events: UInt32) {
        defer { armTimer() }
        if events & WB_EPOLLOUT != 0 { flush() }
        if isClosed { return }
        if events & (WB_EPOLLIN | WB_EPOLLHUP | WB_EPOLLERR | WB_EPOLLRDHUP) != 0 { readAvailable() }
    }

    /// Performs the machine's actions, in their fixed order.
    private func perform(_ actions: ConnectionStateMachine.Actions) {
        if actions.contains(.shutdownWrite) {
            _ = shutdown(fd, Int32(SHUT_WR))
            armTimer()
        }
        if actions.contains(.updateInterest) { updateInterest() }
        if actions.contains(.parseBuffered) { parseRequests() }
        if actions.contains(.dispatchNext) { dispatchNext() }
        if actions.contains(.respondTimeout) { respond(.text(408, "Request Timeout"), keepAlive: false) }
        if actions.contains(.close) { close() }
    }

    private func readAvailable() {
        if case .lingering = machine.phase {
            let count = server.scratch.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
            if count < 0 && (errno == EAGAIN || errno == EINTR) { return }
            perform(machine.discarded(count))
            return
        }
        let count = server.scratch.withUnsafeMutableBytes { buffer in
            read(fd, buffer.baseAddress, buffer.count)
        }
        if count < 0 && (errno == EAGAIN || errno == EINTR) { return }
        if count <= 0 {
            peerClosed()
            return
        }
        server.scratch.withUnsafeBytes { buffer in
            let bytes = UnsafeRawBufferPointer(rebasing: buffer[0..<count])
            if let session = webSocketSession {
                session.received(bytes)
                return
            }
            guard case .http = machine.phase else { return }
            machine.received(now: server.now)
            if proxyPrelude != nil {
                guard takeProxyHeader(bytes) else { return }
            } else {
                parser.append(bytes)
            }
            parseRequests()
        }
    }

    /// Looks for a PROXY header before the first request; true once HTTP bytes follow
    /// (handed to the parser). A header from a peer that is not a trusted proxy, or one
    /// that breaks the protocol, is answered 400 and the connection closes.
    private func takeProxyHeader(_ bytes: UnsafeRawBufferPointer) -> Bool {
        // The common case costs no copy: a request that starts like neither header ("GET ",
        // "POST ...": no "PR", no "\r\n") goes straight to the parser.
        if proxyPrelude!.isEmpty, bytes.count >= 2, ProxyHeader.parse([bytes[0], bytes[1]]) == .notProxy {
            proxyPrelude = nil
            parser.append(bytes)
            return true
        }
        proxyPrelude!.append(contentsOf: bytes)
        let prelude = proxyPrelude!
        switch ProxyHeader.parse(prelude) {
        case .needMore:
            return false
        case .notProxy:
            proxyPrelude = nil
            prelude.withUnsafeBytes { parser.append($0) }
            return true
        case .header(let source, let length) where viaTrustedProxy:
            proxyPrelude = nil
            if let source { remoteAddress = source }
            prelude[length...].withUnsafeBytes { parser.append($0) }
            return true
        case .header, .invalid:
            proxyPrelude = nil
            pending.append(.failure(status: 400))
            perform(machine.parseFailed())
            dispatchNext()
            return false
        }
    }

    private func parseRequests() {
        while !machine.readingPaused, let event = parser.next() {
            switch event {
            case .request(var request):
                request.remoteAddress = remoteAddress
                pending.append(.request(request))
                machine.parsed(midRequest: parser.isMidRequest, now: server.now)
                // A WebSocket upgrade's following bytes are frames, not requests.
                if request.isWebSocketUpgrade { perform(machine.pause()) }
            case .expectContinue:
                send(Array("HTTP/1.1 100 Continue\r\n\r\n".utf8))
            case .failure(let status):
                pending.append(.failure(status: status))
                perform(machine.parseFailed())
            }
        }
        // Bound pipelining: stop reading while many requests wait.
        if pending.count > ConnectionStateMachine.maximumPending { perform(machine.pause()) }
        dispatchNext()
    }

    /// Starts the handler for the oldest waiting request, if none is in flight.
    private func dispatchNext() {
        guard machine.canDispatch, !pending.isEmpty else { return }
        switch pending.removeFirst() {
        case .failure(let status):
            respond(HTTPResponse.text(status, HTTPResponse.reasonPhrase(status)), keepAlive: false)
        case .request(let request):
            let handler = server.handler
            let loop = server.loop
            machine.handlerStarted()
            inFlight = Task(executorPreference: loop) { [self] in
                let response = await handler(request)
                loop.execute { self.complete(request, response) }
            }
        }
    }

    /// The handler answered (loop thread).
    private func complete(_ request: HTTPRequest, _ response: HTTPResponse) {
        guard machine.phase == .http(busy: true) else { return }
        defer { armTimer() }
        inFlight = nil
        let keepAlive = request.keepAlive && !machine.draining
        if let consumer = response.webSocket {
            guard request.isWebSocketUpgrade, !machine.draining else {
                respond(.text(400, "Bad Request"), keepAlive: false)
                return
            }
            upgrade(request, response, consumer)
            return
        }
        if let producer = response.stream, request.method != "HEAD" {
            stream(response, producer, keepAlive: keepAlive)
            return
        }
        if request.method == "HEAD" {
            var response = response
            response.headers.set("Content-Length", String(response.body.count))
            response.body = []
            respond(response, keepAlive: keepAlive, contentLengthSet: true)
        } else {
            respond(response, keepAlive: keepAlive)
        }
        perform(machine.responded(pending: pending.count))
    }

    /// Writes the head of a streamed response, then the producer's chunks as they come
    /// (loop thread); the connection stays busy until the last chunk.
    private func stream(_ response: HTTPResponse, _ producer: @escaping @Sendable (HTTPResponseStream) async -> Void,
                        keepAlive: Bool) {
        var head = statusAndHeaders(response)
        head += "Transfer-Encoding: chunked\r\n" + (keepAlive ? "" : "Connection: close\r\n") + "\r\n"
        send(Array(head.utf8))
        let loop = server.loop
        let body = HTTPResponseStream { [weak self] chunk in
            guard let connection = self else { return }
            loop.execute { connection.send(chunk) }
        }
        inFlight = Task(executorPreference: loop) { [self] in
            await producer(body)
            loop.execute { self.finishStream(status: response.status, keepAlive: keepAlive) }
        }
    }

    /// The producer returned: the last chunk, then the next request (loop thread).
    private func finishStream(status: Int, keepAlive: Bool) {
        guard machine.phase == .http(busy: true) else { return }
        defer { armTimer() }
        inFlight = nil
        machine.responding(status: status, keepAlive: keepAlive, streamed: true, now: server.now)
        send(Array("0\r\n\r\n".utf8))
        perform(machine.responded(pending: pending.count))
    }

    private func respond(_ response: HTTPResponse, keepAlive: Bool, contentLengthSet: Bool = false) {
        var head = statusAndHeaders(response)
        if contentLengthSet, let length = response.headers["Content-Length"] {
            head += "Content-Length: \(length)\r\n"
        } else if response.status >= 200 && response.status != 204 && response.status != 304 {
            head += "Content-Length: \(response.body.count)\r\n"
        }
        if !keepAlive { head += "Connection: close\r\n" }
        head += "\r\n"
        var bytes = Array(head.utf8)
        bytes.append(contentsOf: response.body)
        // Told first: the flush that writes the last byte ends a connection that must end.
        machine.responding(status: response.status, keepAlive: keepAlive, now: server.now)
        send(bytes)
    }

    /// The status line and the handler's headers, without the framing ones the server sets
    /// (`Content-Length`, `Connection`, `Transfer-Encoding`).
    private func statusAndHeaders(_ response: HTTPResponse) -> String {
        var head = "HTTP/1.1 \(response.status) \(response.reason ?? HTTPResponse.reasonPhrase(response.status))\r\n"
        for (name, value) in response.headers
        where !name.caseInsensitiveEquals("Content-Length") && !name.caseInsensitiveEquals("Connection")
            && !name.caseInsensitiveEquals("Transfer-Encoding") {
            head += "\(name): \(value)\r\n"
        }
        return head
    }

    private func upgrade(_ request: HTTPRequest, _ response: HTTPResponse,
                         _ consumer: HTTPResponse.WebSocketConsumer) {
        var head = "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
        head += "Sec-WebSocket-Accept: \(WebSocketAccept.value(forKey: request.headers["Sec-WebSocket-Key"] ?? ""))\r\n"
        for (name, value) in response.headers { head += "\(name): \(value)\r\n" }
        send(Array((head + "\r\n").utf8))
        let session = WebSocketSession(connection: self, now: server.now)
        webSocketSession = session
        pending.removeAll()
        perform(machine.upgraded())
        server.webSocketOpened(self)
        let leftover = parser.takeRemainingBytes()
        parser = HTTPRequestParser(limits: server.limits)
        session.start(consumer)
        if !leftover.isEmpty { leftover.withUnsafeBytes { session.received($0) } }
    }

    private func peerClosed() {
        inFlight?.cancel()
        webSocketSession?.transportClosed()
        close()
    }

    // MARK: - Output

    /// Queues bytes and writes what the socket takes now.
    func send(_ bytes: [UInt8]) {
        guard !isClosed else { return }
        outbound.append(bytes)
        if outbound.count > server.limits.maxOutboundBytesPerConnection {
            // A peer that does not read: stop spending memory on it.
            webSocketSession?.transportClosed(code: WebSocketCloseCode.policyViolation)
            close()
            return
        }
        flush()
    }

    private func flush() {
        while let chunk = outbound.front {
            // send with MSG_NOSIGNAL: a peer that reset the connection is EPIPE here, never a
            // SIGPIPE that would end the process.
            let written = chunk.withUnsafeBytes { Glibc.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            if written < 0 {
                if errno == EAGAIN || errno == EINTR { break }
                peerClosed()
                return
            }
            outbound.consume(written)
        }
        if outbound.isEmpty && machine.closeAfterFlush {
            perform(machine.flushed(now: server.now))  // linger or close
            return
        }
        updateInterest()
    }

    private func updateInterest() {
        guard !isClosed else { return }
        var events = WB_EPOLLRDHUP
        if machine.wantsReads { events |= WB_EPOLLIN }
        if !outbound.isEmpty { events |= WB_EPOLLOUT }
        server.loop.modify(fd, token: token, events: events)
    }

    /// Sends what is queued, then closes.
    func closeWhenFlushed() {
        machine.closeWhenFlushed()
        if outbound.isEmpty { close() } else { updateInterest() }
    }

    /// Closes the socket now; an in-flight handler is cancelled.
    func close() {
        inFlight?.cancel()
        webSocketSession?.transportClosed()
        guard !isClosed else { return }
        machine.closed()
        webSocketSession = nil
        inFlight = nil
        server.loop.clearDeadline(self)
        server.loop.deregister(fd, token: token)
        Glibc.close(fd)
        outbound = OutboundQueue()
        server.connectionClosed(self)
    }

    // MARK: - Timeouts and shutdown

    /// Whether no request waits or is half-read (the idle timeout applies).
    private var idle: Bool { pending.isEmpty && !parser.isMidRequest }

    /// The earliest instant at which `deadlinePassed` has something to do: the machine's
    /// (linger, request head, idle) or the WebSocket's (keep-alive, close handshake); nil
    /// for none (a handler is running: its response re-arms).
    private var nextDeadline: ContinuousClock.Instant? {
        if let session = webSocketSession { return session.nextDeadline }
        return machine.nextDeadline(idle: idle)
    }

    /// Arms the connection's timer at its next deadline, unless one is armed no later.
    /// Activity only moves deadlines later, so reads and writes leave the timer alone: a
    /// timer that fires early re-checks and re-arms. Only a deadline that moved earlier (a
    /// request started, a linger, a close handshake) re-arms at once. No sweep visits idle
    /// connections.
    func armTimer() {
        if let deadline = nextDeadline { arm(at: deadline) }
    }

    /// Sets the connection's deadline at `deadline` unless it is set no later. The loop
    /// keeps it in place in its deadline heap: no timer object, closure or allocation per
    /// connection, and the heap holds the connection only while the deadline is set.
    private func arm(at deadline: ContinuousClock.Instant) {
        guard !isClosed else { return }
        if let due = server.loop.deadline(of: self), due <= deadline { return }
        // Just past the deadline: the checks are strict (`>`), so it must not fire on the
        // deadline itself.
        server.loop.setDeadline(self, at: deadline + .milliseconds(1))
    }

    /// The loop: the connection's deadline passed.
    func deadlineReached(now: ContinuousClock.Instant) {
        deadlinePassed(now: now)
        armTimer()
    }

    /// Enforces the header-read, idle and linger timeouts and the WebSocket's deadlines.
    func deadlinePassed(now: ContinuousClock.Instant) {
        if let session = webSocketSession {
            session.deadlinePassed(now: now)
        } else {
            perform(machine.deadlinePassed(now: now, idle: idle))
        }
    }

    /// Graceful shutdown: idle HTTP connections close now, busy ones after their response;
    /// WebSockets get a close frame with `code` and `reason`.
    func drain(code: UInt16, reason: String) {
        defer { armTimer() }
        machine.drain()
        if let session = webSocketSession {
            session.close(code: code, reason: reason)
            return
        }
        pending.removeAll()
        if !machine.isBusy { closeWhenFlushed() }  // idle or lingering: now
    }

    /// Whether a handler is still running (graceful shutdown waits for these).
    var isBusy: Bool { machine.isBusy }
}

/// Bytes waiting to be written, as a queue of chunks.
struct OutboundQueue {
    private var chunks: [[UInt8]] = []
    private var head = 0
    private var offset = 0
    private(set) var count = 0

    var isEmpty: Bool { count == 0 }

    mutating func append(_ bytes: [UInt8]) {
        guard !bytes.isEmpty else { return }
        chunks.append(bytes)
        count += bytes.count
    }

    /// The unwritten part of the first chunk.
    var front: ArraySlice<UInt8>? {
        head < chunks.count ? chunks[head][offset...] : nil
    }

    mutating func consume(_ written: Int) {
        count -= written
        offset += written
        if offset == chunks[head].count {
            head += 1
            offset = 0
            if head == chunks.count { chunks.removeAll(); head = 0 }
        }
    }
}
