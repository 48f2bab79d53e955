import Foundation

/// One HTTPS POST to a push service, as `CurlTransport` sends it.
public struct PushHTTPRequest: Sendable {
    /// The full URL.
    public var url: String
    /// Header lines as (name, value); values must not contain CR or LF.
    public var headers: [(String, String)]
    /// The body.
    public var body: [UInt8]
    /// The whole transfer's time limit (connect included), in milliseconds.
    public var timeoutMilliseconds: Int
    /// APNs speaks only HTTP/2: a response over HTTP/1.x is an error.
    public var requireHTTP2: Bool
    /// Sent on a connection of its own that no other transfer shares (a retry whose first
    /// try's connection was refused or died: not multiplexed onto connections that may be
    /// going the same way).
    public var ownConnection: Bool

    /// Creates a request.
    public init(url: String, headers: [(String, String)], body: [UInt8], timeoutMilliseconds: Int, requireHTTP2: Bool,
                ownConnection: Bool = false) {
        self.url = url
        self.headers = headers
        self.body = body
        self.timeoutMilliseconds = timeoutMilliseconds
        self.requireHTTP2 = requireHTTP2
        self.ownConnection = ownConnection
    }
}

/// What came back: a status, or none when the outcome is unknown (transport error, timeout).
public struct PushHTTPResponse: Sendable, Equatable {
    /// The HTTP status; nil when no response arrived.
    public let status: Int?
    /// The body, at most `CurlTransport.maximumBody` bytes.
    public let body: [UInt8]
    /// Response headers by lowercased name (the last value wins), at most 4 KiB in all.
    public let headers: [String: String]
    /// libcurl's result code (0: the transfer completed).
    public let curlCode: Int
    /// 2 for HTTP/2, 1 for HTTP/1.x, 0 when unknown.
    public let httpVersion: Int

    /// Creates a response.
    public init(status: Int?, body: [UInt8] = [], headers: [String: String] = [:], curlCode: Int = 0, httpVersion: Int = 0) {
        self.status = status
        self.body = body
        self.headers = headers
        self.curlCode = curlCode
        self.httpVersion = httpVersion
    }

    /// A response header line split into a lowercased name and a trimmed value; nil for
    /// the status line, the blank line and anything without a colon.
    static func headerField(_ line: String) -> (name: String, value: String)? {
        guard let colon = line.firstIndex(of: ":"), colon != line.startIndex else { return nil }
        let name = line[..<colon].lowercased()
        guard name.allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber || $0 == "-") }) else { return nil }
        return (name, line[line.index(after: colon)...].trimmingCharacters(in: .whitespacesAndNewlines))
    }

    /// A transfer that never got a status (`curlCode` says why).
    static func failed(_ code: Int) -> PushHTTPResponse { PushHTTPResponse(status: nil, curlCode: code) }
}
