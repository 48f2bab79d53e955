/// Tiny C shims for calls Swift cannot make directly.
///
/// - epoll: `struct epoll_event` is packed on x86_64, which Swift imports awkwardly, so the
///   shim passes `events` and a 64-bit token separately.
/// - eventfd and accept4: wrapped so that every descriptor is non-blocking and close-on-exec.
/// - malloc: glibc's `mallinfo2` and `malloc_trim` (malloc.h is not in Swift's Glibc module).
/// - libcurl: `curl_easy_setopt` is variadic, which Swift cannot call; one typed wrapper per
///   argument kind.
#ifndef WHEREABOT_CSYSTEM_H
#define WHEREABOT_CSYSTEM_H

#include <stdint.h>
#include <sys/socket.h>
#include <curl/curl.h>

/// One readiness event: the epoll event bits and the token given at registration.
typedef struct wb_event {
    uint32_t events;
    uint64_t token;
} wb_event;

extern const uint32_t WB_EPOLLIN;
extern const uint32_t WB_EPOLLOUT;
extern const uint32_t WB_EPOLLERR;
extern const uint32_t WB_EPOLLHUP;
extern const uint32_t WB_EPOLLRDHUP;
extern const uint32_t WB_EPOLLET;

/// Creates a close-on-exec epoll instance; -1 and errno on failure.
int wb_epoll_create(void);
/// Adds `fd` with `events` and `token`; -1 and errno on failure.
int wb_epoll_add(int epfd, int fd, uint32_t events, uint64_t token);
/// Changes the event mask of a registered `fd`; -1 and errno on failure.
int wb_epoll_modify(int epfd, int fd, uint32_t events, uint64_t token);
/// Removes `fd`; -1 and errno on failure.
int wb_epoll_remove(int epfd, int fd);
/// Waits up to `timeout_ms` (-1 forever) for at most `max` events; the count, or -1 and errno.
int wb_epoll_wait(int epfd, wb_event *events, int max, int timeout_ms);

/// Creates a non-blocking, close-on-exec eventfd with counter 0; -1 and errno on failure.
int wb_eventfd_create(void);
/// Adds one to the eventfd counter, waking any epoll waiter; 0, or -1 and errno.
int wb_eventfd_signal(int fd);
/// Reads and resets the counter; returns the count read, 0 when it was already 0.
uint64_t wb_eventfd_drain(int fd);

/// Accepts one connection as non-blocking and close-on-exec; -1 and errno (EAGAIN when none).
int wb_accept(int listen_fd, struct sockaddr *addr, socklen_t *len);

/// `curl_easy_setopt` for options taking a long.
CURLcode wb_curl_setopt_long(CURL *curl, CURLoption option, long value);
/// `curl_easy_setopt` for options taking a C string (copied by libcurl).
CURLcode wb_curl_setopt_string(CURL *curl, CURLoption option, const char *value);
/// `curl_easy_setopt` for options taking a pointer (a `curl_slist`, user data).
CURLcode wb_curl_setopt_pointer(CURL *curl, CURLoption option, void *value);
/// The signature of libcurl's write and header callbacks.
typedef size_t (*wb_curl_write_callback)(char *data, size_t size, size_t count, void *user);
/// `curl_easy_setopt` for CURLOPT_WRITEFUNCTION and CURLOPT_HEADERFUNCTION.
CURLcode wb_curl_setopt_write_callback(CURL *curl, CURLoption option, wb_curl_write_callback callback);
/// `curl_easy_getinfo` for a long result, such as CURLINFO_RESPONSE_CODE.
CURLcode wb_curl_getinfo_long(CURL *curl, CURLINFO info, long *value);

/// `curl_multi_setopt` for options taking a long, such as CURLMOPT_PIPELINING.
CURLMcode wb_curl_multi_setopt_long(CURLM *multi, CURLMoption option, long value);

/// `curl_version_info(CURLVERSION_NOW)`; the macro is not visible to Swift.
const curl_version_info_data *wb_curl_version_info(void);

/// One look at the allocator (glibc `mallinfo2`, a walk of its bins): the bytes handed out
/// and not had back (`uordblks` plus `hblkhd`, the mmapped blocks), and the bytes it holds
/// free, not given back to the system (`fordblks`).
void wb_heap_stats(size_t *in_use, size_t *free_bytes);
/// Gives the allocator's free pages back to the system (`malloc_trim(0)`); 1 if any were.
int wb_heap_trim(void);
/// The process's resident set in bytes (`/proc/self/statm`, read without allocating); 0 if
/// it cannot be read.
size_t wb_resident_bytes(void);

#endif
