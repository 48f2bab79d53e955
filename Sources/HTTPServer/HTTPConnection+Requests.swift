import Loop

/// The HTTP side of a connection (loop thread): a PROXY header, parsing, requests answered
/// in order by handler tasks, streamed responses, and the upgrade to a WebSocket.
extension HTTPConnection {
    /// Looks for a PROXY header before the first request; true once HTTP bytes follow
    /// (handed to the parser). A header from a peer that is not a trusted proxy, or one
    /// that breaks the protocol, is answered 400 and the connection closes.
    func takeProxyHeader(_ bytes: UnsafeRawBufferPointer) -> Bool {
        guard let http, var prelude = http.proxyPrelude else { return false }
        // The common case costs no copy: a request that starts like neither header ("GET ",
        // "POST ...": no "PR", no "\r\n") goes straight to the parser.
        if prelude.isEmpty, bytes.count >= 2, ProxyHeader.parse([bytes[0], bytes[1]]) == .notProxy {
            http.proxyPrelude = nil
            http.parser.append(bytes)
            return true
        }
        http.proxyPrelude = nil  // uniquely held while it grows
        prelude.append(contentsOf: bytes)
        switch ProxyHeader.parse(prelude) {
        case .needMore:
            http.proxyPrelude = prelude
            return false
        case .notProxy:
            prelude.withUnsafeBytes { http.parser.append($0) }
            return true
        case .header(let source, let length) where viaTrustedProxy:
            if let source { remoteAddress = source }
            prelude[length...].withUnsafeBytes { http.parser.append($0) }
            return true
        case .header, .invalid:
            http.pending.append(.failure(status: 400))
            perform(machine.parseFailed())
            dispatchNext()
            return false
        }
    }

    func parseRequests() {
        while !machine.readingPaused, let event = http?.parser.next() {
            switch event {
            case .request(var request):
                // Per request: a balancer's connection may carry many clients' requests.
                request.remoteAddress = serverCore.client(of: request.headers, peer: remoteAddress)
                http?.pending.append(.request(request))
                machine.parsed(midRequest: http?.parser.isMidRequest ?? false, now: serverCore.now)
                // A WebSocket upgrade's following bytes are frames, not requests.
                if request.isWebSocketUpgrade { perform(machine.pause()) }
            case .expectContinue:
                send(Array("HTTP/1.1 100 Continue\r\n\r\n".utf8))
            case .failure(let status):
                http?.pending.append(.failure(status: status))
                perform(machine.parseFailed())
            }
        }
        // Bound pipelining: stop reading while many requests wait.
        if (http?.pending.count ?? 0) > ConnectionStateMachine.maximumPending { perform(machine.pause()) }
        dispatchNext()
    }

    /// Starts the handler for the oldest waiting request, if none is in flight.
    func dispatchNext() {
        guard machine.canDispatch, let http, !http.pending.isEmpty else { return }
        switch http.pending.removeFirst() {
        case .failure(let status):
            respond(HTTPResponse.text(status, HTTPResponse.reasonPhrase(status)), keepAlive: false)
        case .request(let request):
            let handler = serverCore.handler
            let loop = serverCore.loop
            machine.handlerStarted()
            let core = serverCore
            core.handlerStarted()
            // Owners: the connection, which cancels it when it closes, and the server, which
            // counts it until it ended (a shutdown waits for it).
            http.inFlight = Task(executorPreference: loop) { [self] in
                let response = await handler(request)
                loop.execute {
                    self.complete(request, response)
                    core.handlerEnded()
                }
            }
        }
    }

    /// The handler answered (loop thread).
    func complete(_ request: HTTPRequest, _ response: HTTPResponse) {
        guard machine.phase == .http(busy: true) else { return }
        defer { armTimer() }
        http?.inFlight = nil
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
        perform(machine.responded(pending: http?.pending.count ?? 0))
    }

    /// Writes the head of a streamed response, then the producer's chunks as they come
    /// (loop thread); the connection stays busy until the last chunk.
    func stream(_ response: HTTPResponse, _ producer: @escaping @Sendable (HTTPResponseStream) async -> Void,
                        keepAlive: Bool) {
        var head = statusAndHeaders(response)
        head += "Transfer-Encoding: chunked\r\n" + (keepAlive ? "" : "Connection: close\r\n") + "\r\n"
        send(Array(head.utf8))
        let loop = serverCore.loop
        let body = HTTPResponseStream { [weak self] chunk in
            guard let connection = self else { return }
            loop.execute { connection.send(chunk) }
        }
        let core = serverCore
        core.handlerStarted()
        // Owners: as a request's handler (`dispatchNext`).
        http?.inFlight = Task(executorPreference: loop) { [self] in
            await producer(body)
            loop.execute {
                self.finishStream(status: response.status, keepAlive: keepAlive)
                core.handlerEnded()
            }
        }
    }

    /// The producer returned: the last chunk, then the next request (loop thread).
    func finishStream(status: Int, keepAlive: Bool) {
        guard machine.phase == .http(busy: true) else { return }
        defer { armTimer() }
        http?.inFlight = nil
        machine.responding(status: status, keepAlive: keepAlive, streamed: true, now: serverCore.now)
        send(Array("0\r\n\r\n".utf8))
        perform(machine.responded(pending: http?.pending.count ?? 0))
    }

    func respond(_ response: HTTPResponse, keepAlive: Bool, contentLengthSet: Bool = false) {
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
        machine.responding(status: response.status, keepAlive: keepAlive, now: serverCore.now)
        send(bytes)
    }

    /// The status line and the handler's headers, without the framing ones the server sets
    /// (`Content-Length`, `Connection`, `Transfer-Encoding`).
    func statusAndHeaders(_ response: HTTPResponse) -> String {
        var head = "HTTP/1.1 \(response.status) \(response.reason ?? HTTPResponse.reasonPhrase(response.status))\r\n"
        for (name, value) in response.headers
        where !name.caseInsensitiveEquals("Content-Length") && !name.caseInsensitiveEquals("Connection")
            && !name.caseInsensitiveEquals("Transfer-Encoding") {
            head += "\(name): \(value)\r\n"
        }
        return head
    }

    func upgrade(_ request: HTTPRequest, _ response: HTTPResponse,
                         _ consumer: HTTPResponse.WebSocketConsumer) {
        var head = "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
        head += "Sec-WebSocket-Accept: \(WebSocketAccept.value(forKey: request.headers["Sec-WebSocket-Key"] ?? ""))\r\n"
        for (name, value) in response.headers { head += "\(name): \(value)\r\n" }
        send(Array((head + "\r\n").utf8))
        webSocket = WebSocketSide(maxMessageBytes: serverCore.limits.maxWebSocketMessageBytes, now: now)
        perform(machine.upgraded())
        serverCore.webSocketOpened(self)
        let leftover = http?.parser.takeRemainingBytes() ?? []
        http = nil
        startWebSocket(consumer)
        if !leftover.isEmpty { leftover.withUnsafeBytes { webSocketReceived($0) } }
    }
}
