import CSystem
import Foundation
import Glibc
import Synchronization

/// A small WebSocket client (RFC 6455) over plain TCP (`ws://`), sharing the server's frame
/// codec: for the reference phone and for tests.
///
/// It sends the upgrade request, checks the 101 and `Sec-WebSocket-Accept`, masks every
/// frame it sends, answers pings, and completes the close handshake. A thread of its own
/// reads the socket; `send` and `close` may be called from any task.
public final class WebSocketClient: Sendable {
    /// Why connecting failed.
    public enum ConnectError: Error, Equatable {
        /// The URL is not `ws://host[:port]/path` (or `http://`).
        case invalidURL
        /// TCP connect failed (errno).
        case connectFailed(Int32)
        /// The server answered without upgrading: its status and body.
        case rejected(status: Int, body: String)
        /// The server answered 429 or 503 with `Retry-After` (whole seconds): come back then.
        case tryAgainLater(status: Int, seconds: Int, body: String)
        /// The server's 101 was not a valid handshake.
        case badHandshake
    }

    private let fd: Int32
    private let writeLock = Mutex(false)  // true once our close frame went out
    let inbox = MessageInbox()

    private init(fd: Int32) {
        self.fd = fd
    }

    deinit { Glibc.close(fd) }

    /// Connects and performs the opening handshake.
    /// - Parameters:
    ///   - url: `ws://host:port/path?query`.
    ///   - headers: extra request headers (for example `Authorization`).
    ///   - maxMessageBytes: the largest message accepted from the server.
    public static func connect(_ url: String, headers: [(String, String)] = [],
                               maxMessageBytes: Int = 1 << 20) async throws -> WebSocketClient {
        guard let components = URLComponents(string: url), let host = components.host,
              ["ws", "http"].contains(components.scheme ?? "") else { throw ConnectError.invalidURL }
        let port = components.port ?? 80
        var target = components.percentEncodedPath.isEmpty ? "/" : components.percentEncodedPath
        if let query = components.percentEncodedQuery { target += "?" + query }
        let key = WebSocketAccept.randomKey()
        var request = "GET \(target) HTTP/1.1\r\nHost: \(host):\(port)\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
        request += "Sec-WebSocket-Key: \(key)\r\nSec-WebSocket-Version: 13\r\n"
        for (name, value) in headers { request += "\(name): \(value)\r\n" }
        request += "\r\n"
        let requestBytes = Array(request.utf8)

        let (fd, leftover) = try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<(Int32, [UInt8]), Error>) in
            Thread {
                continuation.resume(with: Result { try handshake(host: host, port: port, request: requestBytes, key: key) })
            }.start()
        }
        let client = WebSocketClient(fd: fd)
        let thread = Thread { client.readLoop(leftover: leftover, maxMessageBytes: maxMessageBytes) }
        thread.name = "ws-client"
        thread.start()
        return client
    }

    /// The server's messages until the connection closes.
    public var messages: WebSocketMessages { WebSocketMessages(inbox: inbox) }

    /// The close code received (or 1006 when the connection dropped), nil while open.
    public var closeCode: UInt16? { inbox.closeCode }

    /// The close reason received.
    public var closeReason: String { inbox.closeReason }

    /// Sends a text message.
    public func send(_ text: String) { sendFrame(.text, Array(text.utf8)) }

    /// Sends a binary message.
    public func send(binary: [UInt8]) { sendFrame(.binary, binary) }

    /// Sends raw bytes as they are (tests use this to send malformed frames).
    public func sendRaw(_ bytes: [UInt8]) { writeAll(bytes) }

    /// Sends a close frame; the server answers with its own and closes the connection.
    public func close(code: UInt16 = WebSocketCloseCode.normal, reason: String = "") {
        let first = writeLock.withLock { sent -> Bool in
            defer { sent = true }
            return !sent
        }
        if first { writeAll(WebSocketFrameEncoder.close(code: code, reason: reason, maskKey: RandomBytes.make(4))) }
    }

    private func sendFrame(_ opcode: WebSocketOpcode, _ payload: [UInt8]) {
        writeAll(WebSocketFrameEncoder.frame(opcode, payload, maskKey: RandomBytes.make(4)))
    }

    private func writeAll(_ bytes: [UInt8]) {
        writeLock.withLock { _ in
            var offset = 0
            while offset < bytes.count {
                let written = bytes[offset...].withUnsafeBytes { Glibc.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
                if written <= 0 { return }
                offset += written
            }
        }
    }

    private func readLoop(leftover: [UInt8], maxMessageBytes: Int) {
        var decoder = WebSocketFrameDecoder(role: .client, maxMessageBytes: maxMessageBytes)
        decoder.append(leftover)
        var buffer = [UInt8](repeating: 0, count: 65536)
        while true {
            while let event = decoder.next() {
                switch event {
                case .text(let text): inbox.deliver(.text(text))
                case .binary(let bytes): inbox.deliver(.binary(bytes))
                case .ping(let payload): sendFrame(.pong, payload)
                case .pong: break
                case .close(let code, let reason):
                    close(code: code ?? WebSocketCloseCode.normal, reason: reason)
                    inbox.finish(code: code ?? 1005, reason: reason)
                    shutdown(fd, Int32(SHUT_RDWR))
                    return
                case .failure(let code):
                    close(code: code)
                    inbox.finish(code: code)
                    shutdown(fd, Int32(SHUT_RDWR))
                    return
                }
            }
            let count = read(fd, &buffer, buffer.count)
            if count < 0 && errno == EINTR { continue }
            if count <= 0 {
                inbox.finish(code: 1006)
                return
            }
            buffer.withUnsafeBytes { decoder.append(UnsafeRawBufferPointer(rebasing: $0[0..<count])) }
        }
    }

    /// Connects, sends the upgrade, reads the response head (blocking; on its own thread).
    private static func handshake(host: String, port: Int, request: [UInt8], key: String) throws -> (Int32, [UInt8]) {
        var hints = addrinfo()
        hints.ai_family = AF_INET
        hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
        var info: UnsafeMutablePointer<addrinfo>?
        guard getaddrinfo(host, String(port), &hints, &info) == 0, let first = info else {
            throw ConnectError.connectFailed(EHOSTUNREACH)
        }
        defer { freeaddrinfo(info) }
        let fd = socket(first.pointee.ai_family, first.pointee.ai_socktype, first.pointee.ai_protocol)
        guard fd >= 0 else { throw ConnectError.connectFailed(errno) }
        guard Glibc.connect(fd, first.pointee.ai_addr, first.pointee.ai_addrlen) == 0 else {
            let code = errno
            Glibc.close(fd)
            throw ConnectError.connectFailed(code)
        }
        var yes: Int32 = 1
        setsockopt(fd, Int32(IPPROTO_TCP), TCP_NODELAY, &yes, socklen_t(MemoryLayout<Int32>.size))
        var offset = 0
        while offset < request.count {
            let written = request[offset...].withUnsafeBytes { Glibc.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            if written <= 0 { Glibc.close(fd); throw ConnectError.connectFailed(errno) }
            offset += written
        }
        var received: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 4096)
        while true {
            if let end = headEnd(received) {
                let head = String(decoding: received[..<end], as: UTF8.self)
                let rest = Array(received[(end + 4)...])
                let lines = head.components(separatedBy: "\r\n")
                let status = lines.first.flatMap { Int($0.split(separator: " ").dropFirst().first ?? "") } ?? 0
                var fields: [String: String] = [:]
                for line in lines.dropFirst() {
                    guard let colon = line.firstIndex(of: ":") else { continue }
                    fields[line[..<colon].lowercased()] = line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)
                }
                guard status == 101 else {
                    let length = Int(fields["content-length"] ?? "0") ?? 0
                    var body = rest
                    while body.count < length {
                        let count = read(fd, &buffer, buffer.count)
                        if count <= 0 { break }
                        body.append(contentsOf: buffer[0..<count])
                    }
                    Glibc.close(fd)
                    let text = String(decoding: body.prefix(length), as: UTF8.self)
                    if status == 429 || status == 503, let seconds = fields["retry-after"].flatMap({ Int($0) }), seconds >= 0 {
                        throw ConnectError.tryAgainLater(status: status, seconds: seconds, body: text)
                    }
                    throw ConnectError.rejected(status: status, body: text)
                }
                guard fields["sec-websocket-accept"] == WebSocketAccept.value(forKey: key),
                      fields["upgrade"]?.lowercased() == "websocket" else {
                    Glibc.close(fd)
                    throw ConnectError.badHandshake
                }
                return (fd, rest)
            }
            let count = read(fd, &buffer, buffer.count)
            if count <= 0 || received.count > 16384 { Glibc.close(fd); throw ConnectError.badHandshake }
            received.append(contentsOf: buffer[0..<count])
        }
    }

    private static func headEnd(_ bytes: [UInt8]) -> Int? {
        guard bytes.count >= 4 else { return nil }
        for index in 0...(bytes.count - 4)
        where bytes[index] == 13 && bytes[index + 1] == 10 && bytes[index + 2] == 13 && bytes[index + 3] == 10 {
            return index
        }
        return nil
    }
}
