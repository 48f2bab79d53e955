import Foundation
import Glibc
import Synchronization

/// A TCP proxy on 127.0.0.1 for tests: forwards to an upstream port until `silence()`,
/// after which the connections open at that moment stop forwarding in both directions
/// (sockets stay open, bytes are dropped): a network that went silent. Connections made
/// later forward normally.
final class SilentProxy: Sendable {
    let port: Int
    private let listenFD: Int32
    private let upstreamPort: Int
    private let generation = Atomic<Int>(0)

    init(upstreamPort: Int) throws {
        self.upstreamPort = upstreamPort
        let listenFD = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        self.listenFD = listenFD
        var yes: Int32 = 1
        setsockopt(listenFD, SOL_SOCKET, SO_REUSEADDR, &yes, socklen_t(MemoryLayout<Int32>.size))
        var address = SilentProxy.loopback(port: 0)
        _ = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(listenFD, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        listen(listenFD, 16)
        var bound = sockaddr_in()
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &bound) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(listenFD, $0, &length) }
        }
        port = Int(UInt16(bigEndian: bound.sin_port))
        let thread = Thread { [self] in self.acceptLoop() }
        thread.start()
    }

    /// Makes every connection open now go silent.
    func silence() { generation.add(1, ordering: .sequentiallyConsistent) }

    /// Stops accepting. The accept thread closes the listening socket as it leaves: closed
    /// here, its number could be another test's new socket by the time the thread calls
    /// `accept` again.
    func close() { shutdown(listenFD, Int32(SHUT_RDWR)) }

    private static func loopback(port: Int) -> sockaddr_in {
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = UInt16(port).bigEndian
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        return address
    }

    private func acceptLoop() {
        while true {
            let client = accept(listenFD, nil, nil)
            if client < 0 {
                if errno == EINTR { continue }
                Glibc.close(listenFD)
                return
            }
            let upstream = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
            var address = SilentProxy.loopback(port: upstreamPort)
            let connected = withUnsafePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(upstream, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
            }
            if connected != 0 { Glibc.close(client); Glibc.close(upstream); continue }
            let born = generation.load(ordering: .sequentiallyConsistent)
            for (from, to) in [(client, upstream), (upstream, client)] {
                Thread { [self] in self.pump(from: from, to: to, born: born) }.start()
            }
        }
    }

    private func pump(from: Int32, to: Int32, born: Int) {
        var buffer = [UInt8](repeating: 0, count: 16384)
        while true {
            let count = read(from, &buffer, buffer.count)
            if count <= 0 { shutdown(to, Int32(SHUT_WR)); return }
            if generation.load(ordering: .sequentiallyConsistent) != born { continue }  // silent: drop
            var offset = 0
            while offset < count {
                let written = buffer[offset..<count].withUnsafeBytes { send(to, $0.baseAddress, count - offset, Int32(MSG_NOSIGNAL)) }
                if written <= 0 { return }
                offset += written
            }
        }
    }
}
