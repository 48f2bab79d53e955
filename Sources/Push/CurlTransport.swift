import CCurl
import CSystem
import Foundation
import Glibc
import Synchronization

/// Every push goes through one libcurl multi handle on a thread of its own (docs/protocol.md,
/// "The transport"):
/// HTTP/2 with `CURLOPT_PIPEWAIT`, so that concurrent pushes share one connection as
/// streams; no host-connection cap, so that streams a GOAWAY refused are retried by libcurl
/// on a new connection. libcurl moves a refused stream at most five times, to connections
/// that may be refusing too (measured: 1 push of 30 under repeated GOAWAYs failed so twice,
/// its retry multiplexed onto such a connection); a request with `ownConnection` (the
/// senders' one retry) therefore gets a connection no other transfer shares.
///
/// Only the transport's thread touches libcurl handles. Work arrives through a locked queue
/// and an eventfd that `curl_multi_poll` watches. After a transfer that got no status or a
/// 500/503, the transport starts a new *connection generation* (a fresh multi handle) for
/// new transfers; the old one finishes its in-flight transfers and is then cleaned up, so a
/// sick connection is dropped without aborting its healthy neighbours.
public final class CurlTransport: Sendable {
    /// Response bodies are cut here (APNs and push services answer with small JSON).
    public static let maximumBody = 4096
    /// Transfers waiting for the thread at once by default; more fail at once (`CURLE_AGAIN`).
    public static let defaultMaximumQueued = 10_000

    private struct Job: @unchecked Sendable {
        let request: PushHTTPRequest
        let continuation: CheckedContinuation<PushHTTPResponse, Never>
    }

    private struct Shared {
        var queue: [Job] = []
        var stopping = false
        var running = false
    }

    private let shared = Mutex(Shared())
    private let wakeFD: Int32
    private let caFile: String?
    private let maximumQueued: Int
    private let counters = Mutex((connections: 0, generations: 1))

    /// A transport; `caFile` replaces the system CA bundle (test fakes with self-signed
    /// certificates only). At most `maximumQueued` transfers wait for the thread; transfers
    /// sent before `start()` wait for it.
    public init(caFile: String? = nil, maximumQueued: Int = CurlTransport.defaultMaximumQueued) throws {
        self.maximumQueued = maximumQueued
        Self.initializeCurl
        let fd = wb_eventfd_create()
        guard fd >= 0 else { throw PushTransportError.cannotStart }
        wakeFD = fd
        self.caFile = caFile
    }

    deinit { close(wakeFD) }

    private static let initializeCurl: Void = { _ = curl_global_init(Int(CURL_GLOBAL_DEFAULT)) }()

    /// New TCP+TLS connections opened so far, and connection generations started.
    public var statistics: (connections: Int, generations: Int) { counters.withLock { $0 } }

    /// Transfers waiting for the transport's thread to take them.
    public var queuedCount: Int { shared.withLock { $0.queue.count } }

    /// Starts the transport's thread (once).
    public func start() {
        let start = shared.withLock { shared -> Bool in
            defer { shared.running = true }
            return !shared.running && !shared.stopping
        }
        guard start else { return }
        let thread = Thread { [self] in Loop(transport: self).run() }
        thread.name = "push-curl"
        thread.start()
    }

    /// Sends `request` and waits for its outcome; never throws (a failure has no status).
    public func send(_ request: PushHTTPRequest) async -> PushHTTPResponse {
        await withCheckedContinuation { continuation in
            let accepted = shared.withLock { shared -> Bool in
                guard !shared.stopping, shared.queue.count < maximumQueued else { return false }
                shared.queue.append(Job(request: request, continuation: continuation))
                return true
            }
            if accepted { _ = wb_eventfd_signal(wakeFD) } else { continuation.resume(returning: .failed(Int(CURLE_AGAIN.rawValue))) }
        }
    }

    /// Stops the thread; transfers in flight end without a status.
    public func shutdown() {
        shared.withLock { $0.stopping = true }
        _ = wb_eventfd_signal(wakeFD)
    }

    // MARK: The thread

    /// One in-flight transfer: its easy handle and what its callbacks collect.
    private final class Transfer {
        let easy: UnsafeMutableRawPointer
        let job: Job
        let generation: Generation
        var headerList: UnsafeMutablePointer<curl_slist>?
        var body: [UInt8] = []
        var headerBytes = 0
        var headers: [String: String] = [:]

        init(easy: UnsafeMutableRawPointer, job: Job, generation: Generation) {
            self.easy = easy
            self.job = job
            self.generation = generation
        }
    }

    /// One multi handle and how many transfers it still carries.
    private final class Generation {
        let multi: UnsafeMutableRawPointer
        var inFlight = 0

        init?() {
            guard let multi = curl_multi_init() else { return nil }
            self.multi = multi
            _ = wb_curl_multi_setopt_long(multi, CURLMOPT_PIPELINING, Int(CURLPIPE_MULTIPLEX))
        }

        deinit { curl_multi_cleanup(multi) }
    }

    private final class Loop {
        let transport: CurlTransport
        var current: Generation?
        var retiring: [Generation] = []
        var transfers: [UnsafeMutableRawPointer: Transfer] = [:]

        init(transport: CurlTransport) {
            self.transport = transport
            current = Generation()
        }

        func run() {
            while true {
                let (jobs, stopping) = transport.shared.withLock { shared in
                    defer { shared.queue.removeAll() }
                    return (shared.queue, shared.stopping)
                }
                if stopping {
                    for job in jobs { job.continuation.resume(returning: .failed(Int(CURLE_ABORTED_BY_CALLBACK.rawValue))) }
                    for transfer in Array(transfers.values) { finish(transfer, code: CURLE_ABORTED_BY_CALLBACK) }
                    return
                }
                for job in jobs { add(job) }
                for generation in [current].compactMap({ $0 }) + retiring {
                    var running: Int32 = 0
                    _ = curl_multi_perform(generation.multi, &running)
                    var left: Int32 = 0
                    while let message = curl_multi_info_read(generation.multi, &left) {
                        guard message.pointee.msg == CURLMSG_DONE, let easy = message.pointee.easy_handle,
                              let transfer = transfers[easy] else { continue }
                        finish(transfer, code: message.pointee.data.result)
                    }
                }
                retiring.removeAll { $0.inFlight == 0 }
                var wait = curl_waitfd(fd: transport.wakeFD, events: Int16(CURL_WAIT_POLLIN), revents: 0)
                let timeout: Int32 = retiring.isEmpty ? 1000 : 10
                if let current {
                    _ = curl_multi_poll(current.multi, &wait, 1, timeout, nil)
                } else {
                    usleep(UInt32(timeout) * 1000)
                    self.current = Generation()
                }
                _ = wb_eventfd_drain(transport.wakeFD)
            }
        }

        func add(_ job: Job) {
            // A transfer that asks for a connection of its own gets a multi handle of its own,
            // retired (cleaned up) as soon as that transfer ends.
            let own = job.request.ownConnection ? Generation() : nil
            guard let generation = own ?? current, let easy = curl_easy_init() else {
                job.continuation.resume(returning: .failed(Int(CURLE_OUT_OF_MEMORY.rawValue)))
                return
            }
            if let own { retiring.append(own) }
            let transfer = Transfer(easy: easy, job: job, generation: generation)
            let request = job.request
            _ = wb_curl_setopt_string(easy, CURLOPT_URL, request.url)
            _ = wb_curl_setopt_long(easy, CURLOPT_HTTP_VERSION, Int(CURL_HTTP_VERSION_2TLS))
            _ = wb_curl_setopt_long(easy, CURLOPT_PIPEWAIT, 1)
            _ = wb_curl_setopt_long(easy, CURLOPT_POST, 1)
            _ = wb_curl_setopt_long(easy, CURLOPT_POSTFIELDSIZE, request.body.count)
            request.body.withUnsafeBytes { bytes in
                _ = wb_curl_setopt_pointer(easy, CURLOPT_COPYPOSTFIELDS, UnsafeMutableRawPointer(mutating: bytes.baseAddress ?? UnsafeRawPointer(bitPattern: 1)!))
            }
            // Without an explicit Content-Type libcurl would send a form type; no Expect.
            for (name, value) in request.headers + [("Expect", "")] {
                transfer.headerList = curl_slist_append(transfer.headerList, value.isEmpty ? "\(name):" : "\(name): \(value)")
            }
            _ = wb_curl_setopt_pointer(easy, CURLOPT_HTTPHEADER, transfer.headerList.map { UnsafeMutableRawPointer($0) })
            _ = wb_curl_setopt_long(easy, CURLOPT_CONNECTTIMEOUT_MS, 5000)
            _ = wb_curl_setopt_long(easy, CURLOPT_TIMEOUT_MS, max(1, request.timeoutMilliseconds))
            _ = wb_curl_setopt_long(easy, CURLOPT_NOSIGNAL, 1)
            _ = wb_curl_setopt_long(easy, CURLOPT_TCP_KEEPALIVE, 1)
            _ = wb_curl_setopt_long(easy, CURLOPT_FOLLOWLOCATION, 0)
            _ = wb_curl_setopt_string(easy, CURLOPT_PROTOCOLS_STR, "https,http")
            if let caFile = transport.caFile { _ = wb_curl_setopt_string(easy, CURLOPT_CAINFO, caFile) }
            let user = Unmanaged.passUnretained(transfer).toOpaque()
            _ = wb_curl_setopt_write_callback(easy, CURLOPT_WRITEFUNCTION) { data, size, count, user in
                let transfer = Unmanaged<Transfer>.fromOpaque(user!).takeUnretainedValue()
                let length = size * count
                let room = max(0, CurlTransport.maximumBody - transfer.body.count)
                if room > 0, let data {
                    transfer.body += UnsafeRawBufferPointer(start: data, count: min(room, length))
                }
                return length  // the rest is read and dropped, not an error
            }
            _ = wb_curl_setopt_pointer(easy, CURLOPT_WRITEDATA, user)
            _ = wb_curl_setopt_write_callback(easy, CURLOPT_HEADERFUNCTION) { data, size, count, user in
                let transfer = Unmanaged<Transfer>.fromOpaque(user!).takeUnretainedValue()
                let length = size * count
                transfer.headerBytes += length
                guard transfer.headerBytes <= 4096, let data else { return length }
                let line = String(decoding: UnsafeRawBufferPointer(start: data, count: length), as: UTF8.self)
                if let field = PushHTTPResponse.headerField(line) { transfer.headers[field.name] = field.value }
                return length
            }
            _ = wb_curl_setopt_pointer(easy, CURLOPT_HEADERDATA, user)
            transfers[easy] = transfer
            generation.inFlight += 1
            if curl_multi_add_handle(generation.multi, easy) != CURLM_OK {
                finish(transfer, code: CURLE_FAILED_INIT)
            }
        }

        func finish(_ transfer: Transfer, code: CURLcode) {
            let easy = transfer.easy
            var status = 0, version = 0, connects = 0
            _ = wb_curl_getinfo_long(easy, CURLINFO_RESPONSE_CODE, &status)
            _ = wb_curl_getinfo_long(easy, CURLINFO_HTTP_VERSION, &version)
            _ = wb_curl_getinfo_long(easy, CURLINFO_NUM_CONNECTS, &connects)
            curl_multi_remove_handle(transfer.generation.multi, easy)
            curl_easy_cleanup(easy)
            curl_slist_free_all(transfer.headerList)
            transfers[easy] = nil
            transfer.generation.inFlight -= 1

            let httpVersion = version == Int(CURL_HTTP_VERSION_2_0) ? 2 : (version == 0 ? 0 : 1)
            var response = PushHTTPResponse(status: code == CURLE_OK && status > 0 ? status : nil, body: transfer.body,
                                            headers: transfer.headers, curlCode: Int(code.rawValue), httpVersion: httpVersion)
            if response.status != nil, transfer.job.request.requireHTTP2, httpVersion != 2 {
                response = PushHTTPResponse(status: nil, curlCode: Int(CURLE_HTTP2.rawValue), httpVersion: httpVersion)
            }
            let sick = response.status == nil || response.status == 500 || response.status == 503
            transport.counters.withLock { counters in
                counters.connections += connects
                if sick, transfer.generation === current { counters.generations += 1 }
            }
            if sick, transfer.generation === current, let fresh = Generation() {
                retiring.append(transfer.generation)
                current = fresh
            }
            transfer.job.continuation.resume(returning: response)
        }
    }
}

/// The transport could not start (no eventfd).
public enum PushTransportError: Error, Equatable, Sendable {
    /// The eventfd or multi handle could not be created.
    case cannotStart
}
