#define _GNU_SOURCE
#include "CSystem.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <malloc.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

const uint32_t WB_EPOLLIN = EPOLLIN;
const uint32_t WB_EPOLLOUT = EPOLLOUT;
const uint32_t WB_EPOLLERR = EPOLLERR;
const uint32_t WB_EPOLLHUP = EPOLLHUP;
const uint32_t WB_EPOLLRDHUP = EPOLLRDHUP;
const uint32_t WB_EPOLLET = EPOLLET;

int wb_epoll_create(void) { return epoll_create1(EPOLL_CLOEXEC); }

static int wb_epoll_ctl(int epfd, int op, int fd, uint32_t events, uint64_t token) {
    struct epoll_event event = {.events = events, .data = {.u64 = token}};
    return epoll_ctl(epfd, op, fd, &event);
}

int wb_epoll_add(int epfd, int fd, uint32_t events, uint64_t token) {
    return wb_epoll_ctl(epfd, EPOLL_CTL_ADD, fd, events, token);
}

int wb_epoll_modify(int epfd, int fd, uint32_t events, uint64_t token) {
    return wb_epoll_ctl(epfd, EPOLL_CTL_MOD, fd, events, token);
}

int wb_epoll_remove(int epfd, int fd) { return epoll_ctl(epfd, EPOLL_CTL_DEL, fd, NULL); }

int wb_epoll_wait(int epfd, wb_event *events, int max, int timeout_ms) {
    enum { BATCH = 256 };
    struct epoll_event raw[BATCH];
    if (max > BATCH) max = BATCH;
    int count;
    do {
        count = epoll_wait(epfd, raw, max, timeout_ms);
    } while (count < 0 && errno == EINTR);
    for (int i = 0; i < count; i++) {
        events[i].events = raw[i].events;
        events[i].token = raw[i].data.u64;
    }
    return count;
}

int wb_eventfd_create(void) { return eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC); }

int wb_eventfd_signal(int fd) {
    uint64_t one = 1;
    ssize_t written;
    do {
        written = write(fd, &one, sizeof one);
    } while (written < 0 && errno == EINTR);
    /* EAGAIN means the counter is saturated: a wake-up is already pending. */
    return (written == sizeof one || (written < 0 && errno == EAGAIN)) ? 0 : -1;
}

uint64_t wb_eventfd_drain(int fd) {
    uint64_t count = 0;
    ssize_t got;
    do {
        got = read(fd, &count, sizeof count);
    } while (got < 0 && errno == EINTR);
    return got == sizeof count ? count : 0;
}

int wb_accept(int listen_fd, struct sockaddr *addr, socklen_t *len) {
    int fd;
    do {
        fd = accept4(listen_fd, addr, len, SOCK_NONBLOCK | SOCK_CLOEXEC);
    } while (fd < 0 && errno == EINTR);
    return fd;
}

CURLcode wb_curl_setopt_long(CURL *curl, CURLoption option, long value) {
    return curl_easy_setopt(curl, option, value);
}

CURLcode wb_curl_setopt_string(CURL *curl, CURLoption option, const char *value) {
    return curl_easy_setopt(curl, option, value);
}

CURLcode wb_curl_setopt_pointer(CURL *curl, CURLoption option, void *value) {
    return curl_easy_setopt(curl, option, value);
}

CURLcode wb_curl_setopt_write_callback(CURL *curl, CURLoption option, wb_curl_write_callback callback) {
    return curl_easy_setopt(curl, option, callback);
}

CURLcode wb_curl_getinfo_long(CURL *curl, CURLINFO info, long *value) {
    return curl_easy_getinfo(curl, info, value);
}

CURLMcode wb_curl_multi_setopt_long(CURLM *multi, CURLMoption option, long value) {
    return curl_multi_setopt(multi, option, value);
}

const curl_version_info_data *wb_curl_version_info(void) { return curl_version_info(CURLVERSION_NOW); }

void wb_heap_stats(size_t *in_use, size_t *free_bytes) {
    struct mallinfo2 info = mallinfo2();
    *in_use = info.uordblks + info.hblkhd;
    *free_bytes = info.fordblks;
}

int wb_heap_trim(void) { return malloc_trim(0); }

size_t wb_resident_bytes(void) {
    char text[128];
    int fd = open("/proc/self/statm", O_RDONLY | O_CLOEXEC);
    if (fd < 0) return 0;
    ssize_t count = read(fd, text, sizeof text - 1);
    close(fd);
    if (count <= 0) return 0;
    text[count] = 0;
    char *field = text;
    strtoul(field, &field, 10);  /* the size; the resident set follows */
    unsigned long pages = strtoul(field, NULL, 10);
    return (size_t)pages * (size_t)sysconf(_SC_PAGESIZE);
}
