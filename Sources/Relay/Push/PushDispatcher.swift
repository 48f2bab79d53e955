import Foundation
import Push
import RelayCore
import Synchronization

/// Sends one claimed push stage to each of its targets, through a queue shared fairly
/// between accounts (`FairPushQueue`), deletes targets the services call dead, counts and
/// logs every push. A log line names a target only by its fingerprint — never a device
/// token, an endpoint, a JWT or a coordinate.
final class PushDispatcher: Sendable {
    private let services: PushServices
    private let database: RelayDatabase
    private let metrics: PushMetrics
    private let logger: Logger
    /// Credential errors already logged at error level (one per service, reason and token
    /// generation); bounded.
    private let loggedAuthErrors = Mutex<Set<String>>([])
    /// Pushes waiting for a slot, per account (each waiter resumes true to send, false when refused).
    private let queue = Mutex(FairPushQueue<CheckedContinuation<Bool, Never>, UUID>())
    /// The instance's clock: a reminder's deadline, a send's duration.
    private let clock: RelayClock

    init(services: PushServices, database: RelayDatabase, metrics: PushMetrics, logger: Logger, clock: RelayClock = .system) {
        self.clock = clock
        self.services = services
        self.database = database
        self.metrics = metrics
        self.logger = logger
    }

    /// Pushes `kind` for request `id` to the claim's targets; returns when all have answered.
    func send(_ kind: PushPlan.Kind, stage: PushPlan.Stage, request id: UUID, claim: PushClaim) async {
        guard let clientID = claim.clientID, let expiresMs = claim.expiresMs else { return }
        let payload = PushPayload(kind: PushPayload.Kind(rawValue: kind.rawValue) ?? .alert, requestID: id, clientID: clientID,
                                  agentName: claim.clientName, requester: claim.requester, expiresMs: expiresMs,
                                  reason: claim.reason)
        let deadline = Date(timeIntervalSince1970: Double(expiresMs) / 1000)
        let requestID = id.uuidString.lowercased()
        // One payload per language among the targets (a text the catalog lacks is English).
        let apnsBodies = Self.inEach(claim.apns?.map(\.language), payload.apns)
        let webBodies = Self.inEach(claim.web?.map(\.language), payload.webPush)
        let silent = kind == .silent
        let apns: @Sendable (PushClaim.APNsTarget) -> APNsSender.Notification = { target in
            APNsSender.Notification(
                token: target.token, environment: target.environment,
                pushType: silent ? "background" : "alert", priority: silent ? 5 : 10, collapseID: silent ? nil : requestID,
                id: APNsSender.notificationID(requestID, stage.rawValue, target.token), payload: apnsBodies[target.language]!,
                deadline: deadline)
        }
        let topic = requestID.replacingOccurrences(of: "-", with: "")
        let web: @Sendable (PushClaim.WebTarget) -> WebPushSender.Message = { target in
            WebPushSender.Message(subscription: target.subscription, payload: webBodies[target.language]!, topic: topic,
                                  deadline: deadline)
        }
        await fanOut(kind: kind.rawValue, subject: ["request": requestID], claim: claim, apns: apns, web: silent ? nil : web)
    }

    /// Pushes a reminder of a standing grant (docs/protocol.md, "Reminders") to the claim's targets: an alert with
    /// Keep and Remove, replacing an older reminder of the same grant on the device.
    func remind(_ reminder: GrantReminder, claim: PushClaim) async {
        let deadline = clock.date.addingTimeInterval(GrantReminder.pushLifetime)
        let key = reminder.pushKey
        let apnsBodies = Self.inEach(claim.apns?.map(\.language), reminder.apns)
        let webBodies = Self.inEach(claim.web?.map(\.language), reminder.webPush)
        let apns: @Sendable (PushClaim.APNsTarget) -> APNsSender.Notification = { target in
            APNsSender.Notification(token: target.token, environment: target.environment, pushType: "alert", priority: 10,
                                    collapseID: "reminder-\(key)", id: UUID().uuidString, payload: apnsBodies[target.language]!,
                                    deadline: deadline)
        }
        let web: @Sendable (PushClaim.WebTarget) -> WebPushSender.Message = { target in
            WebPushSender.Message(subscription: target.subscription, payload: webBodies[target.language]!, topic: key,
                                  deadline: deadline)
        }
        await fanOut(kind: "reminder", subject: ["reminder": key], claim: claim, apns: apns, web: web)
    }

    /// `payload` in each of `languages` (at most the ten targets' own), keyed by language.
    private static func inEach(_ languages: [String]?, _ payload: (String) -> [UInt8]) -> [String: [UInt8]] {
        Dictionary(uniqueKeysWithValues: Set(languages ?? []).map { ($0, payload($0)) })
    }

    /// Sends to each of the claim's targets, at once (the fair queue orders accounts), and
    /// counts those the budgets held back; returns when all have answered. `web` nil: no Web
    /// Push for this kind.
    private func fanOut(kind: String, subject: [String: String], claim: PushClaim,
                        apns: @escaping @Sendable (PushClaim.APNsTarget) -> APNsSender.Notification,
                        web: (@Sendable (PushClaim.WebTarget) -> WebPushSender.Message)?) async {
        let account = claim.owner ?? Self.unknownAccount
        for (service, count) in [("apns", claim.limited?.apns ?? 0), ("webpush", claim.limited?.web ?? 0)] where count > 0 {
            for _ in 0..<count { metrics.push(service: service, kind: kind, delivery: PushDelivery(result: .limited), seconds: nil) }
            logger.info("push_limited", subject.merging(["service": service, "count": String(count)]) { $1 })
        }
        await withTaskGroup(of: Void.self) { group in
            for target in claim.apns ?? [] {
                group.addTask {
                    let notification = apns(target)
                    await self.deliver(service: "apns", kind: kind, subject: subject.merging(["apns_id": notification.id]) { $1 },
                                       target: target.token, account: account) {
                        await self.services.apns?.send(notification)
                    }
                }
            }
            guard let web else { return }
            for target in claim.web ?? [] {
                group.addTask {
                    let message = web(target)
                    await self.deliver(service: "webpush", kind: kind, subject: subject, target: target.endpoint, account: account) {
                        await self.services.webPush?.send(message)
                    }
                }
            }
        }
    }

    /// Sends through `push` (nil: the service is off) when `account`'s turn comes, then
    /// counts, logs (`subject` names the request or reminder) and drops dead targets.
    private func deliver(service: String, kind: String, subject: [String: String], target: String, account: UUID,
                         _ push: () async -> PushDelivery?) async {
        let started = clock.instant
        let sent: PushDelivery??
        if await turn(of: account) {
            sent = await push()
            perform(queue.withLock { $0.finished(account: account) })
        } else {
            sent = .some(PushDelivery(result: .limited, reason: "queue_full"))
        }
        let elapsed = clock.instant - started
        let delivery = sent.flatMap { $0 } ?? PushDelivery(result: .disabled)
        let seconds = sent.flatMap { $0 } == nil || delivery.result == .limited
            ? nil : elapsed.seconds
        metrics.push(service: service, kind: kind, delivery: delivery, seconds: seconds)
        var fields = subject.merging(["service": service, "kind": kind,
                                      "result": delivery.result.rawValue, "target": pushTargetFingerprint(target)]) { $1 }
        if let status = delivery.status { fields["status"] = String(status) }
        if let reason = delivery.reason { fields["reason"] = reason }
        if delivery.retried { fields["retried"] = "true" }
        switch delivery.result {
        case .authError where firstAuthError(service: service, reason: delivery.reason ?? ""):
            logger.error("push_auth_error", fields)
        case .rejected:
            logger.error("push_rejected", fields)
        case .dropped:
            logger.info("push", fields)
            do {
                if service == "apns" {
                    try await database.dropAPNsToken(target, unregisteredAt: delivery.unregisteredAt)
                } else {
                    try await database.dropWebPushSubscription(target)
                }
            } catch {
                logger.failure("push_drop_failed", error, ["service": service, "target": pushTargetFingerprint(target)])
            }
        default:
            logger.info("push", fields)
        }
    }

    /// Waits for a slot of `account` in the fair queue; false when its queue is full.
    private func turn(of account: UUID) async -> Bool {
        await withCheckedContinuation { waiter in
            perform(queue.withLock { $0.submit(waiter, account: account) })
        }
    }

    private func perform(_ actions: [FairPushQueue<CheckedContinuation<Bool, Never>, UUID>.Action]) {
        for action in actions {
            switch action {
            case .start(let waiter): waiter.resume(returning: true)
            case .refuse(let waiter): waiter.resume(returning: false)
            }
        }
    }

    private func firstAuthError(service: String, reason: String) -> Bool {
        let generation = (try? services.apns?.providerToken.current().generation).map(String.init) ?? "-"
        return loggedAuthErrors.withLock { Self.firstTime("\(service)|\(generation)|\(reason)", in: &$0) }
    }

    /// The queue's account for a claim without an owner (a database older than the budgets).
    private static let unknownAccount = UUID()

    /// Credential errors remembered at most (then forgotten, so each may be logged again).
    static let maximumLoggedAuthErrors = 1_000

    /// Whether `key` is new to `seen`, which never holds more than `limit` keys.
    static func firstTime(_ key: String, in seen: inout Set<String>, limit: Int = maximumLoggedAuthErrors) -> Bool {
        if seen.count >= limit, !seen.contains(key) { seen.removeAll() }
        return seen.insert(key).inserted
    }
}
