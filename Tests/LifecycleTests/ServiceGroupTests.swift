import Lifecycle
import Synchronization
import Testing
import TestSupport

/// The group: services start in order, run once all have started, and stop in reverse, each
/// one's graceful `shutdown()` awaited and its `run()` ended before the service started before
/// it stops; an early end or a failed start stops the group the same way; a group shut down
/// before its start stops every service and starts none.
@Suite struct ServiceGroupTests {
    /// What the services did, in order.
    final class Journal: Sendable {
        private let entries = Mutex<[String]>([])
        func add(_ entry: String) { entries.withLock { $0.append(entry) } }
        var all: [String] { entries.withLock { $0 } }
        /// The entries that begin with one of `prefixes`, in order.
        func only(_ prefixes: String...) -> [String] { all.filter { entry in prefixes.contains { entry.hasPrefix($0) } } }
    }

    struct Failure: Error, Equatable {
        let service: String
    }

    /// A gate a test opens: `wait()` returns once it is open (or the task is cancelled).
    final class Gate: Sendable {
        private let stream: AsyncStream<Void>
        private let input: AsyncStream<Void>.Continuation
        init() { (stream, input) = AsyncStream.makeStream() }
        func open() { input.finish() }
        func wait() async { for await _ in stream {} }
    }

    /// A service that writes each step into `journal`. Its run ends (returns or throws) when
    /// `end` opens, else when cancelled; its shutdown waits for `shutdownGate` when given.
    struct Probe: Service {
        let name: String
        let journal: Journal
        var startFails = false
        var end: Gate?
        var endThrows = false
        var shutdownGate: Gate?

        func start() async throws {
            journal.add("start \(name)")
            if startFails { throw Failure(service: name) }
        }

        func run() async throws {
            journal.add("run \(name)")
            if let end {
                await end.wait()
                if Task.isCancelled {
                    journal.add("cancelled \(name)")
                    return
                }
                journal.add("ended \(name)")
                if endThrows { throw Failure(service: name) }
                return
            }
            await untilCancelled()
            journal.add("cancelled \(name)")
        }

        func shutdown() async {
            journal.add("shutdown \(name)")
            await shutdownGate?.wait()
            journal.add("shut down \(name)")
        }
    }

    /// What the group logged.
    final class Reports: Sendable {
        private let lines = Mutex<[String]>([])
        var log: ServiceGroup.Log {
            { event, service, error in self.lines.withLock { $0.append("\(event) \(service)" + (error == nil ? "" : " (error)")) } }
        }
        var all: [String] { lines.withLock { $0 } }
    }

    @Test func servicesStartInOrderAndStopInReverse() async throws {
        let journal = Journal(), reports = Reports()
        let group = ServiceGroup(["a", "b", "c"].map { Probe(name: $0, journal: journal) }, log: reports.log)
        try await group.start()
        try await eventually("every service runs") { journal.only("run").count == 3 }
        #expect(Array(journal.all.prefix(3)) == ["start a", "start b", "start c"], "no service runs before every one started")
        await group.shutdown()
        // Each service's shutdown, then its run's end, before the one started before it.
        #expect(journal.only("shutdown", "shut down", "cancelled") == [
            "shutdown c", "shut down c", "cancelled c",
            "shutdown b", "shut down b", "cancelled b",
            "shutdown a", "shut down a", "cancelled a",
        ])
        #expect(reports.all.isEmpty, "a stop the group asked for is no failure")
        #expect(await group.run() == .shutDown, "returns at once: the group has stopped, as asked")
        await group.shutdown()  // a second shutdown changes nothing
        #expect(journal.only("shutdown").count == 3)
    }

    /// `shutdown()` returns only once every service stopped, and the next service's stop
    /// waits for the graceful part of the one before (a drain that takes its time).
    @Test func aGracefulShutdownIsAwaitedBeforeTheNextServiceStops() async throws {
        let journal = Journal(), gate = Gate()
        let group = ServiceGroup([Probe(name: "pool", journal: journal),
                                  Probe(name: "server", journal: journal, shutdownGate: gate)])
        try await group.start()
        let stopping = Task { await group.shutdown() }
        try await eventually("the server's graceful stop begins") { journal.all.contains("shutdown server") }
        #expect(!journal.all.contains("cancelled server") && !journal.all.contains("shutdown pool"),
                "neither the server's run nor the pool stops while the server drains")
        gate.open()
        await stopping.value
        #expect(journal.only("shutdown", "shut down", "cancelled") == [
            "shutdown server", "shut down server", "cancelled server", "shutdown pool", "shut down pool", "cancelled pool",
        ])
    }

    /// A service whose run throws before the group stopped it is logged, and the group stops
    /// every service in reverse order, that one included; `run()` returns.
    @Test func aServiceThatFailsStopsTheGroup() async throws {
        let journal = Journal(), reports = Reports(), end = Gate()
        let group = ServiceGroup([Probe(name: "a", journal: journal),
                                  Probe(name: "b", journal: journal, end: end, endThrows: true),
                                  Probe(name: "c", journal: journal)], log: reports.log)
        try await group.start()
        try await eventually("every service runs") { journal.only("run").count == 3 }
        end.open()
        #expect(await group.run() == .serviceEnded("b"), "the process exits non-zero")
        #expect(reports.all == ["service_failed b (error)"])
        #expect(journal.only("shutdown", "cancelled", "ended") == [
            "ended b", "shutdown c", "cancelled c", "shutdown b", "shutdown a", "cancelled a",
        ])
    }

    /// A run that returns by itself is an early end too.
    @Test func aServiceThatReturnsStopsTheGroup() async throws {
        let journal = Journal(), reports = Reports(), end = Gate()
        let group = ServiceGroup([Probe(name: "a", journal: journal), Probe(name: "b", journal: journal, end: end)],
                                 log: reports.log)
        try await group.start()
        end.open()
        #expect(await group.run() == .serviceEnded("b"))
        #expect(reports.all == ["service_ended_early b"])
        #expect(journal.only("shutdown") == ["shutdown b", "shutdown a"])
    }

    /// A start that throws: the services started before it stop in reverse, none of them has
    /// run, the later ones never start, and `start()` throws that error once they have stopped
    /// (a port that cannot be bound keeps the others from doing anything).
    @Test func aFailedStartStopsWhatStartedAndThrows() async throws {
        let journal = Journal(), reports = Reports()
        let group = ServiceGroup([Probe(name: "a", journal: journal), Probe(name: "b", journal: journal),
                                  Probe(name: "c", journal: journal, startFails: true), Probe(name: "d", journal: journal)],
                                 log: reports.log)
        await #expect(throws: Failure(service: "c")) { try await group.start() }
        #expect(journal.only("start") == ["start a", "start b", "start c"])
        #expect(journal.only("shutdown", "cancelled", "run") == ["shutdown b", "shutdown a"])
        #expect(reports.all == ["service_start_failed c (error)"])
        #expect(await group.run() == .shutDown, "start() threw what went wrong")
    }

    /// Shut down before it started: every service's shutdown, in reverse, and no start later.
    @Test func aGroupShutDownBeforeItsStartStopsEveryServiceAndStartsNone() async throws {
        let journal = Journal()
        let group = ServiceGroup(["a", "b"].map { Probe(name: $0, journal: journal) })
        await group.shutdown()
        #expect(journal.all == ["shutdown b", "shut down b", "shutdown a", "shut down a"])
        try await group.start()
        await group.run()
        #expect(journal.only("start", "run").isEmpty)
    }

    /// A closure service does what its closures say, and by default waits for the cancellation.
    @Test func aClosureServiceRunsItsClosures() async throws {
        let journal = Journal()
        let group = ServiceGroup([
            ClosureService("step", shutdown: { journal.add("step stopped") }),
            ClosureService("server", start: { journal.add("bound") }, run: {
                await untilCancelled()
                journal.add("server run ended")
            }, shutdown: { journal.add("server drained") }),
        ])
        try await group.start()
        #expect(journal.all == ["bound"])
        await group.shutdown()
        #expect(journal.all == ["bound", "server drained", "server run ended", "step stopped"])
    }
}
