import CSystem
import Foundation
import Glibc
import TestSupport

/// A TCP client for conformance tests: send exact bytes, read what comes back. Its blocking
/// calls run on threads of their own (`offPool`), never on the concurrency pool that the
/// server's handlers need.
final class RawClient: @unchecked Sendable {
    let fd: Int32

    /// Connects at once, blocking (use `connect(port:)` from async code).
    init(port: Int) throws {
        fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = UInt16(port).bigEndian
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let result = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { Glibc.connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        // No close here: the object is whole, so a throw runs deinit, which closes fd. A
        // second close would close whatever descriptor another test opened under that number
        // meanwhile (a server's connection: it saw a reset and no response).
        guard result == 0 else { throw POSIXError(.ECONNREFUSED) }
        var timeout = timeval(tv_sec: 5, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
    }

    deinit { close(fd) }

    /// Connects to 127.0.0.1:`port`.
    static func connect(port: Int) async throws -> RawClient {
        try await offPool { try RawClient(port: port) }
    }

    func readUntilClose(timeout: Double = 3) async -> (bytes: [UInt8], closed: Bool) {
        await offPool { self.blockingReadUntilClose(timeout: timeout) }
    }

    func readResponses(_ count: Int, timeout: Double = 3) async -> [ParsedResponse] {
        await offPool { self.blockingReadResponses(count, timeout: timeout) }
    }

    /// Reads until what came so far satisfies `enough`, the peer closes or `timeout` passes;
    /// returns everything read.
    func read(until enough: @escaping @Sendable ([UInt8]) -> Bool, timeout: Double = 5) async -> [UInt8] {
        await offPool { self.blockingRead(until: enough, timeout: timeout).bytes }
    }

    func send(_ text: String) { send(Array(text.utf8)) }

    /// Hangs up now (FIN both ways), whoever still holds this client; deinit closes the
    /// descriptor as before.
    func hangUp() { _ = shutdown(fd, Int32(SHUT_RDWR)) }

    func send(_ bytes: [UInt8]) {
        var offset = 0
        while offset < bytes.count {
            let written = bytes[offset...].withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
            if written <= 0 { return }
            offset += written
        }
    }

    /// Reads until the peer closes or `timeout` passes; returns everything read and whether
    /// the peer closed.
    private func blockingReadUntilClose(timeout: Double) -> (bytes: [UInt8], closed: Bool) {
        blockingRead(until: { _ in false }, timeout: timeout)
    }

    /// Reads until what came satisfies `enough`, the peer closes or `timeout` passes.
    private func blockingRead(until enough: ([UInt8]) -> Bool, timeout: Double) -> (bytes: [UInt8], closed: Bool) {
        var result: [UInt8] = []
        let deadline = Date().addingTimeInterval(timeout)
        var buffer = [UInt8](repeating: 0, count: 65536)
        while Date() < deadline, !enough(result) {
            var pollFD = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            let ready = poll(&pollFD, 1, Int32(max(1, deadline.timeIntervalSinceNow * 1000)))
            if ready <= 0 { break }
            let count = Glibc.read(fd, &buffer, buffer.count)
            if count <= 0 { return (result, true) }
            result.append(contentsOf: buffer[0..<count])
        }
        return (result, false)
    }

    /// Reads until `count` complete responses (by Content-Length) arrived or time runs out.
    private func blockingReadResponses(_ count: Int, timeout: Double) -> [ParsedResponse] {
        var data: [UInt8] = []
        var responses: [ParsedResponse] = []
        let deadline = Date().addingTimeInterval(timeout)
        var buffer = [UInt8](repeating: 0, count: 65536)
        while responses.count < count, Date() < deadline {
            while let (response, used) = ParsedResponse.parse(data) {
                responses.append(response)
                data.removeFirst(used)
                if response.status != 100 && responses.count == count { return responses }
            }
            var pollFD = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            if poll(&pollFD, 1, Int32(max(1, deadline.timeIntervalSinceNow * 1000))) <= 0 { break }
            let n = Glibc.read(fd, &buffer, buffer.count)
            if n <= 0 { break }
            data.append(contentsOf: buffer[0..<n])
        }
        while let (response, used) = ParsedResponse.parse(data) {
            responses.append(response)
            data.removeFirst(used)
        }
        return responses
    }
}

/// A response as the raw client saw it.
struct ParsedResponse {
    let status: Int
    let headers: [(String, String)]
    let body: String

    func header(_ name: String) -> String? {
        headers.first { $0.0.lowercased() == name.lowercased() }?.1
    }

    static func parse(_ data: [UInt8]) -> (ParsedResponse, Int)? {
        guard let end = data.indices.dropLast(3).first(where: { data[$0] == 13 && data[$0 + 1] == 10 && data[$0 + 2] == 13 && data[$0 + 3] == 10 }) else { return nil }
        let head = String(decoding: data[..<end], as: UTF8.self).components(separatedBy: "\r\n")
        let statusLine = head[0].split(separator: " ")
        guard statusLine.count >= 2, let status = Int(statusLine[1]) else { return nil }
        let headers = head.dropFirst().compactMap { line -> (String, String)? in
            guard let colon = line.firstIndex(of: ":") else { return nil }
            return (String(line[..<colon]), line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces))
        }
        let length = headers.first { $0.0.lowercased() == "content-length" }.flatMap { Int($0.1) } ?? 0
        let bodyStart = end + 4
        guard data.count >= bodyStart + length else { return nil }
        let body = String(decoding: data[bodyStart..<bodyStart + length], as: UTF8.self)
        return (ParsedResponse(status: status, headers: headers, body: body), bodyStart + length)
    }
}
