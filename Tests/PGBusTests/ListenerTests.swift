import Foundation
import PGBus
import Testing
import TestSupport

/// LISTEN/NOTIFY against the real server: order, scoping, and surviving connection loss.
@Suite struct ListenerTests {
    /// The first event is a resync (LISTEN is active); then 200 notifications arrive in order.
    @Test func notificationsArriveInOrderAfterAnInitialResync() async throws {
        let channel = TestDatabase.uniqueChannel()
        let notifier = try await TestDatabase.connect()
        defer { Task { await notifier.close() } }
        try await ListenerHarness.withListener { listener in
            try await listener.listen(on: [channel]) { events in
                let iterator = events.makeAsyncIterator()
                #expect(try await ListenerHarness.next(iterator) == .resync)
                for n in 0..<200 { try await notifier.notify(channel: channel, payload: "\(n)") }
                for n in 0..<200 {
                    let (notification, _) = try await ListenerHarness.nextNotification(iterator)
                    #expect(notification.payload == "\(n)")
                    #expect(notification.channel == channel)
                }
            }
            #expect(listener.notificationsReceived == 200)
        }
    }

    /// Two consumers of one channel share one LISTEN; it ends when the last one leaves.
    @Test func oneListenPerChannelUntilTheLastConsumerLeaves() async throws {
        let shared = TestDatabase.uniqueChannel(), other = TestDatabase.uniqueChannel()
        let notifier = try await TestDatabase.connect()
        defer { Task { await notifier.close() } }
        try await ListenerHarness.withListener { listener in
            try await listener.listen(on: [shared]) { first in
                let firstIterator = first.makeAsyncIterator()
                #expect(try await ListenerHarness.next(firstIterator) == .resync)
                try await listener.listen(on: [shared, other]) { second in
                    let secondIterator = second.makeAsyncIterator()
                    #expect(try await ListenerHarness.next(secondIterator) == .resync)
                    #expect(listener.listeningChannels == [shared, other])
                    try await notifier.notify(channel: shared, payload: "both")
                    #expect(try await ListenerHarness.nextNotification(firstIterator).0.payload == "both")
                    #expect(try await ListenerHarness.nextNotification(secondIterator).0.payload == "both")
                }
                try await eventually("listening on the shared channel only") { listener.listeningChannels == [shared] }
                try await notifier.notify(channel: shared, payload: "still")
                #expect(try await ListenerHarness.nextNotification(firstIterator).0.payload == "still")
            }
            try await eventually("listening on nothing") { listener.listeningChannels.isEmpty }
        }
    }

    /// Channel names keep their case and may contain quotes and spaces.
    @Test func channelNamesWithUpperCaseAndQuotesWork() async throws {
        let channels = ["Upper_\(UUID().uuidString.prefix(6))", "with \"quotes\" \(UUID().uuidString.prefix(6))"]
        let notifier = try await TestDatabase.connect()
        defer { Task { await notifier.close() } }
        try await ListenerHarness.withListener { listener in
            try await listener.listen(on: channels) { events in
                let iterator = events.makeAsyncIterator()
                #expect(try await ListenerHarness.next(iterator) == .resync)
                for channel in channels {
                    try await notifier.notify(channel: channel, payload: channel)
                    let (notification, _) = try await ListenerHarness.nextNotification(iterator)
                    #expect(notification.channel == channel && notification.payload == channel)
                }
                try await notifier.notify(channel: channels[0].lowercased(), payload: "folded")
                try await notifier.notify(channel: channels[0], payload: "exact")
                #expect(try await ListenerHarness.nextNotification(iterator).0.payload == "exact")
            }
        }
    }

    /// After pg_terminate_backend of the listener's session the sequence yields resync and
    /// later notifications arrive.
    @Test func terminatedListenerReconnectsAndResyncs() async throws {
        let channel = TestDatabase.uniqueChannel()
        var configuration = TestDatabase.configuration
        configuration.applicationName = "pgbus-terminate-\(UUID().uuidString.prefix(8))"
        let admin = try await TestDatabase.connect()
        defer { Task { await admin.close() } }
        try await ListenerHarness.withListener(configuration) { listener in
            try await listener.listen(on: [channel]) { events in
                let iterator = events.makeAsyncIterator()
                #expect(try await ListenerHarness.next(iterator) == .resync)
                try await admin.query("select pg_terminate_backend(pid) from pg_stat_activity where application_name = $1",
                                      [configuration.applicationName])
                #expect(try await ListenerHarness.next(iterator, within: .seconds(10)) == .resync)
                #expect(listener.state == .listening)
                try await admin.notify(channel: channel, payload: "after")
                #expect(try await ListenerHarness.nextNotification(iterator).0.payload == "after")
                #expect(listener.reconnects == 1)
            }
        }
    }

    /// The listener survives `pg_ctl restart`: resync, then notifications flow again.
    @Test func listenerSurvivesAServerRestart() async throws {
        let cluster = try await ScratchCluster.start()
        let channel = "restart_test"
        defer { Task { await cluster.stop() } }
        try await ListenerHarness.withListener(cluster.configuration) { listener in
            try await listener.listen(on: [channel]) { events in
                let iterator = events.makeAsyncIterator()
                #expect(try await ListenerHarness.next(iterator) == .resync)
                try await cluster.restart()
                #expect(try await ListenerHarness.next(iterator, within: .seconds(20)) == .resync)
                let notifier = try await PGConnection.connect(cluster.configuration)
                try await notifier.notify(channel: channel, payload: "back")
                #expect(try await ListenerHarness.nextNotification(iterator).0.payload == "back")
                await notifier.close()
            }
        }
    }

    /// A connection that goes silent (no RST, no data) is detected by the heartbeat and
    /// replaced within 30 s, with the default heartbeat settings.
    @Test func silentConnectionIsReplacedWithinThirtySeconds() async throws {
        let proxy = try SilentProxy(upstreamPort: TestDatabase.port)
        defer { proxy.close() }
        var configuration = TestDatabase.configuration
        configuration.connectionString = TestDatabase.adminURL(port: proxy.port)
        let channel = TestDatabase.uniqueChannel()
        let notifier = try await TestDatabase.connect()
        defer { Task { await notifier.close() } }
        try await ListenerHarness.withListener(configuration) { listener in
            try await listener.listen(on: [channel]) { events in
                let iterator = events.makeAsyncIterator()
                #expect(try await ListenerHarness.next(iterator) == .resync)
                proxy.silence()
                let started = ContinuousClock.now
                #expect(try await ListenerHarness.next(iterator, within: .seconds(30)) == .resync)
                #expect(ContinuousClock.now - started < .seconds(30))
                try await notifier.notify(channel: channel, payload: "through the new connection")
                #expect(try await ListenerHarness.nextNotification(iterator).0.payload == "through the new connection")
            }
        }
    }

    /// shutdown() ends every consumer's sequence and makes run() return; listen then refuses.
    @Test func shutdownEndsConsumersAndRun() async throws {
        let listener = PGListener(configuration: TestDatabase.configuration)
        let runner = Task { await listener.run() }
        let consumer = Task {
            try await listener.listen(on: [TestDatabase.uniqueChannel()]) { events in
                var count = 0
                for await _ in events { count += 1 }
                return count
            }
        }
        try await eventually("the listener listens") { listener.state == .listening }
        listener.shutdown()
        #expect(try await consumer.value >= 1)
        await runner.value
        #expect(listener.state == .stopped)
        await #expect(throws: PGError.self) { try await listener.listen(on: ["x"]) { _ in 0 } }
    }
}
