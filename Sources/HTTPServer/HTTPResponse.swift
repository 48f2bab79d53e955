/// What a handler answers: a plain response, or acceptance of a WebSocket upgrade.
public struct HTTPResponse: Sendable {
    /// The status code.
    public var status: Int
    /// The reason phrase; the standard one when nil.
    public var reason: String?
    /// Header fields; `Content-Length` and `Connection` are set by the server.
    public var headers: HTTPHeaders
    /// The body.
    public var body: [UInt8]
    /// When set, the server answers 101 and hands the WebSocket to this consumer.
    let webSocket: WebSocketConsumer?
    /// When set, the body is written as it is produced (chunked) instead of `body`.
    let stream: (@Sendable (HTTPResponseStream) async -> Void)?

    /// Who takes over an accepted WebSocket.
    enum WebSocketConsumer: Sendable {
        /// A task running this handler, reading `messages`.
        case task(@Sendable (WebSocket) async -> Void)
        /// A delegate called on the event-loop thread.
        case delegate(WebSocketDelegate)
    }

    /// A response with a body.
    public init(status: Int, reason: String? = nil, headers: HTTPHeaders = [:], body: [UInt8] = []) {
        self.status = status
        self.reason = reason
        self.headers = headers
        self.body = body
        self.webSocket = nil
        self.stream = nil
    }

    /// A response whose body `producer` writes piece by piece (`Transfer-Encoding:
    /// chunked`), such as Server-Sent Events: each `write` goes out at once; the response
    /// ends when `producer` returns. If the client goes away the producer's task is
    /// cancelled. Pipelined requests wait until it ends.
    public static func streaming(status: Int = 200, headers: HTTPHeaders = [:],
                                 _ producer: @escaping @Sendable (HTTPResponseStream) async -> Void) -> HTTPResponse {
        HTTPResponse(status: status, headers: headers, stream: producer)
    }

    private init(status: Int, headers: HTTPHeaders, stream: @escaping @Sendable (HTTPResponseStream) async -> Void) {
        self.status = status
        self.reason = nil
        self.headers = headers
        self.body = []
        self.webSocket = nil
        self.stream = stream
    }

    /// A response with a text body (`Content-Type: text/plain; charset=utf-8` unless set).
    public static func text(_ status: Int, _ text: String, headers: HTTPHeaders = [:]) -> HTTPResponse {
        var headers = headers
        if headers["Content-Type"] == nil { headers.add("Content-Type", "text/plain; charset=utf-8") }
        return HTTPResponse(status: status, headers: headers, body: Array(text.utf8))
    }

    /// Accepts a WebSocket upgrade: the server answers 101 Switching Protocols and runs
    /// `handler` with the socket; the connection closes when `handler` returns (1000) unless
    /// it closed it already. Only valid for a request whose `isWebSocketUpgrade` is true.
    public static func webSocket(headers: HTTPHeaders = [:],
                                 _ handler: @escaping @Sendable (WebSocket) async -> Void) -> HTTPResponse {
        HTTPResponse(status: 101, headers: headers, webSocket: .task(handler))
    }

    /// Accepts a WebSocket upgrade and hands the socket to `delegate`, whose methods run on
    /// the server's event-loop thread and must return quickly (start a task for slow work).
    /// No task exists per idle socket, which keeps many idle sockets cheap.
    public static func webSocket(headers: HTTPHeaders = [:], delegate: WebSocketDelegate) -> HTTPResponse {
        HTTPResponse(status: 101, headers: headers, webSocket: .delegate(delegate))
    }

    private init(status: Int, headers: HTTPHeaders, webSocket: WebSocketConsumer) {
        self.status = status
        self.reason = nil
        self.headers = headers
        self.body = []
        self.webSocket = webSocket
        self.stream = nil
    }

    /// The standard reason phrase of a status code.
    public static func reasonPhrase(_ status: Int) -> String {
        switch status {
        case 100: "Continue"
        case 101: "Switching Protocols"
        case 200: "OK"
        case 201: "Created"
        case 202: "Accepted"
        case 204: "No Content"
        case 400: "Bad Request"
        case 401: "Unauthorized"
        case 403: "Forbidden"
        case 404: "Not Found"
        case 405: "Method Not Allowed"
        case 408: "Request Timeout"
        case 409: "Conflict"
        case 410: "Gone"
        case 411: "Length Required"
        case 413: "Content Too Large"
        case 415: "Unsupported Media Type"
        case 422: "Unprocessable Content"
        case 424: "Failed Dependency"
        case 426: "Upgrade Required"
        case 429: "Too Many Requests"
        case 431: "Request Header Fields Too Large"
        case 500: "Internal Server Error"
        case 501: "Not Implemented"
        case 503: "Service Unavailable"
        case 504: "Gateway Timeout"
        case 505: "HTTP Version Not Supported"
        default: "Status \(status)"
        }
    }
}

/// The request handler: called for every request, on any task; may take minutes.
public typealias HTTPHandler = @Sendable (HTTPRequest) async -> HTTPResponse

/// Receives the server's own failures (an event name and fields without user data), on
/// the loop thread; it must return quickly.
public typealias HTTPServerLog = @Sendable (_ event: String, _ fields: [String: String]) -> Void
