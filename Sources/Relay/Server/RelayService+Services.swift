import HTTPServer
import Lifecycle
import Loop
import PGBus

/// The instance's long-lived parts as services of one `ServiceGroup` (docs/architecture.md,
/// "Lifecycle"): the list's order is the start order, and its reverse the stop order — the
/// drain first, the server, the pushes, the heartbeat, LISTEN, and only then the driver's
/// calls, the database pool and the loop, so that no call starts on a shut pool.
extension RelayService {
    /// What the services are made of: the parts `init` built, bottom-up.
    struct Parts: Sendable {
        let configuration: Configuration
        let loop: EventLoop
        let clock: RelayClock
        let database: RelayDatabase
        /// The heartbeat's pool (one connection of its own).
        let beatDatabase: RelayDatabase
        let authenticator: Authenticator
        let timers: RelayTimers
        let pushes: PushSender
        let driver: InstanceDriver
        let listener: PGListener
        let bus: RelayBus
        let health: RelayHealth
        let maintenance: RelayMaintenance
        let server: HTTPServer
        /// Told each time LISTEN is active (again); finished when the bus stops.
        let listening: AsyncStream<Void>.Continuation
        let drain: DrainDeadline
    }

    /// The instance's services, in start order.
    static func services(_ parts: Parts) -> [any Service] {
        let loop = parts.loop, clock = parts.clock, driver = parts.driver, logger = parts.configuration.logger
        let database = parts.database, listener = parts.listener, maintenance = parts.maintenance, server = parts.server
        /// The drain's deadline, fixed by the first step of the stop that needs it.
        @Sendable func deadline() -> ContinuousClock.Instant {
            parts.drain.fix(after: RelayService.defaultDrainTimeout, now: clock.instant)
        }
        return [
            // Runs from `init` (every part is built on it); stops last.
            ClosureService("event loop", run: { await loop.finished() }, shutdown: { loop.stop() }),
            // Shuts down once every user has stopped and no batched call runs.
            ClosureService("database pool", shutdown: {
                await database.batches.idle()
                await database.pool.shutdown()
            }),
            // The phones' batched calls end, and no more start; then the events under way
            // (a fired timer, a socket's queue) end, and no more reach the driver.
            ClosureService("instance calls", shutdown: {
                await driver.finish()
                await parts.timers.events.finish()
            }),
            ClosureService("heartbeat pool", shutdown: { await parts.beatDatabase.pool.shutdown() }),
            ClosureService("signing keys", run: {
                await withTaskExecutorPreference(loop) { await keepSigningKeys(parts) }
                await untilCancelled()  // keys without a refresh schedule: nothing more to do
            }),
            ClosureService("heap trimmer", run: {
                // Off the loop: a trim holds the allocator's locks for milliseconds.
                await withTaskExecutorPreference(globalConcurrentExecutor) { await parts.health.heap.run() }
            }),
            ClosureService("LISTEN connection and bus", run: {
                defer { parts.listening.finish() }  // a start waiting for LISTEN waits no more
                await withTaskExecutorPreference(loop) {
                    await withTaskGroup(of: Void.self) { group in
                        group.addTask { await listener.run() }
                        group.addTask {
                            do { try await parts.bus.run(listener: listener) { parts.listening.yield() } } catch {
                                logger.failure("listener_stopped", error)
                            }
                        }
                    }
                }
            }, shutdown: { listener.shutdown() }),
            ClosureService("heartbeat", run: {
                // Off the loop: a flood of requests must not delay the heartbeat.
                await withTaskExecutorPreference(globalConcurrentExecutor) {
                    guard await register(parts) else { return }  // cancelled: stopping
                    await maintenance.run()
                }
            }, shutdown: { maintenance.stop() }),
            ClosureService("push transport", start: { startPush(parts.configuration) },
                           shutdown: { parts.configuration.push.transport?.shutdown() }),
            ClosureService("push sends", shutdown: {
                await driver.finishPushes()  // the requests' pushes under way are sent, and no more start
                await parts.pushes.finishSending()  // and the reminders'
            }),
            // Binds at its start: a port that cannot be bound fails the instance's start before
            // any service runs (nothing registers an instance that cannot serve).
            ClosureService("HTTP server", start: { _ = try server.start() }, run: { await server.run() }, shutdown: {
                await server.shutdown(drainTimeout: max(.zero, min(.seconds(2), deadline() - clock.instant)),
                                      webSocketCloseCode: WebSocketCloseCode.serviceRestart, reason: "restart")
            }),
            // Stops first: /readyz turns 503, new agent requests and phones get 503, the sockets
            // close 1012, and the calls waiting here get until the deadline.
            ClosureService("drain", shutdown: {
                let deadline = deadline()
                parts.health.startDraining()
                await driver.closeAll()
                await driver.untilIdle(within: deadline - clock.instant)
                await driver.endCalls()  // the rest (hung up, or past the deadline) end now
            }),
        ]
    }

    /// Registers the instance, retrying until the database answers; false when cancelled.
    private static func register(_ parts: Parts) async -> Bool {
        let instance = parts.configuration.instanceID, logger = parts.configuration.logger
        return await retrying {
            do {
                let left = try await parts.database.registerInstance(instance)
                parts.health.beatCompleted()
                if left.connections > 0 || left.abandoned > 0 {
                    logger.info("instance_restarted", ["instance": instance, "connections": String(left.connections),
                                                       "abandoned": String(left.abandoned)])
                }
                return true
            } catch {
                parts.health.beatFailed(error)
                return false
            }
        }
    }

    /// Runs `attempt` until it succeeds, waiting `retryBackoff` after each failure; false
    /// when the task is cancelled first.
    private static func retrying(_ attempt: () async -> Bool) async -> Bool {
        var failures = 0
        while !Task.isCancelled {
            if await attempt() { return true }
            do { try await Task.sleep(for: retryBackoff.delay(attempt: failures, random: .random(in: 0...1))) } catch {
                return false
            }
            failures += 1
        }
        return false
    }

    /// Fetches the JWKS until it answers, then reads it again on its schedule
    /// (`Authenticator.refreshKeys()`: a withdrawn key is refused within one refresh).
    /// Keys already read keep working if it goes away later.
    private static func keepSigningKeys(_ parts: Parts) async {
        let authenticator = parts.authenticator, health = parts.health
        let loaded = await retrying {
            guard let failure = await authenticator.loadKeys() else { return true }
            health.signingKeys.failed(failure.reason)
            return false
        }
        guard loaded else { return }
        health.signingKeys.reached()
        guard parts.configuration.jwks != .none else { return }
        var delay = await authenticator.keysRefreshAfter
        while !Task.isCancelled {
            do { try await Task.sleep(for: .milliseconds(Int(delay * 1000))) } catch { return }
            delay = await authenticator.refreshKeys()
        }
    }

    /// Says once which push services are off, and starts the push transport.
    private static func startPush(_ configuration: Configuration) {
        let push = configuration.push
        if push.apns == nil {
            configuration.logger.info("apns disabled", ["reason": "APNS_KEY_ID, APNS_TEAM_ID, APNS_TOPIC and APNS_PRIVATE_KEY(_FILE) are not all set"])
        }
        if push.webPush == nil {
            configuration.logger.info("web push disabled", ["reason": "VAPID_PRIVATE_KEY and VAPID_SUBJECT are not both set"])
        }
        push.transport?.start()
    }
}
