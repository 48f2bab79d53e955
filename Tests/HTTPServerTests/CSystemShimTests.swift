import CSystem
import Glibc
import Testing

/// The C shim's epoll and eventfd wrappers deliver cross-thread wake-ups.
@Suite struct CSystemShimTests {
    /// An eventfd signalled after registration wakes epoll with its token, and draining it
    /// returns the number of signals; a second wait then times out with no event.
    @Test func eventfdWakesEpollWithItsToken() throws {
        let epfd = wb_epoll_create()
        let efd = wb_eventfd_create()
        #expect(epfd >= 0 && efd >= 0)
        defer { close(epfd); close(efd) }
        #expect(wb_epoll_add(epfd, efd, WB_EPOLLIN, 42) == 0)

        #expect(wb_eventfd_signal(efd) == 0)
        #expect(wb_eventfd_signal(efd) == 0)
        var events = [wb_event](repeating: wb_event(), count: 4)
        let count = wb_epoll_wait(epfd, &events, 4, 1000)
        #expect(count == 1)
        #expect(events[0].token == 42)
        #expect(events[0].events & WB_EPOLLIN != 0)
        #expect(wb_eventfd_drain(efd) == 2)

        #expect(wb_epoll_wait(epfd, &events, 4, 10) == 0)
    }

    /// accept4 through the shim returns -1 with EAGAIN on a non-blocking listener with no
    /// pending connection, instead of blocking.
    @Test func acceptOnIdleListenerDoesNotBlock() throws {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_NONBLOCK.rawValue), 0)
        #expect(fd >= 0)
        defer { close(fd) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        #expect(bound == 0)
        #expect(listen(fd, 8) == 0)
        #expect(wb_accept(fd, nil, nil) == -1)
        #expect(errno == EAGAIN || errno == EWOULDBLOCK)
    }
}
