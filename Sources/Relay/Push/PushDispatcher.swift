import Foundation
import Push
import Synchronization

/// Sends one claimed push stage to each of its targets at once, deletes targets the
/// services call dead, counts and logs every push. A log line names a target only by its
/// fingerprint — never a device token, an endpoint, a JWT or a coordinate.
final class PushDispatcher: Sendable {
    private let services: PushServices
    private let database: RelayDatabase
    private let metrics: PushMetrics
    private let logger: Logger
    /// Credential errors already logged at error level (one per service, reason and token
    /// generation); bounded.
    private let loggedAuthErrors = Mutex<Set<String>>([])

    init(services: PushServices, database: RelayDatabase, metrics: PushMetrics, logger: Logger) {
        self.services = services
        self.database = database
        self.metrics = metrics
        self.logger = logger
    }

    /// Pushes `kind` for request `id` to the claim's targets; returns when all have answered.
    func send(_ kind: PushPlan.Kind, stage: PushPlan.Stage, request id: UUID, claim: PushClaim) async {
        guard let clientID = claim.clientID, let expiresMs = claim.expiresMs else { return }
        let payload = PushPayload(kind: PushPayload.Kind(rawValue: kind.rawValue) ?? .alert, requestID: id, clientID: clientID,
                                  agentName: claim.clientName, requester: claim.requester, expiresMs: expiresMs)
        let deadline = Date(timeIntervalSince1970: Double(expiresMs) / 1000)
        let requestID = id.uuidString.lowercased()
        let apnsBody = payload.apns()
        let webBody = payload.webPush()
        await withTaskGroup(of: Void.self) { group in
            for target in claim.apns ?? [] {
                group.addTask {
                    let notification = APNsSender.Notification(
                        token: target.token, environment: target.environment,
                        pushType: kind == .silent ? "background" : "alert", priority: kind == .silent ? 5 : 10,
                        collapseID: kind == .silent ? nil : requestID,
                        id: APNsSender.notificationID(requestID, stage.rawValue, target.token), payload: apnsBody, deadline: deadline)
                    await self.deliver(service: "apns", kind: kind, request: requestID, target: target.token,
                                       extra: ["apns_id": notification.id]) {
                        await self.services.apns?.send(notification)
                    }
                }
            }
            for target in claim.web ?? [] where kind != .silent {
                group.addTask {
                    let message = WebPushSender.Message(subscription: target.subscription, payload: webBody,
                                                        topic: requestID.replacingOccurrences(of: "-", with: ""), deadline: deadline)
                    await self.deliver(service: "webpush", kind: kind, request: requestID, target: target.endpoint, extra: [:]) {
                        await self.services.webPush?.send(message)
                    }
                }
            }
        }
    }

    /// Sends through `push` (nil: the service is off), then counts, logs and drops dead targets.
    private func deliver(service: String, kind: PushPlan.Kind, request: String, target: String, extra: [String: String],
                         _ push: () async -> PushDelivery?) async {
        let started = ContinuousClock.now
        let sent = await push()
        let elapsed = ContinuousClock.now - started
        let delivery = sent ?? PushDelivery(result: .disabled)
        let seconds = sent == nil ? nil : Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
        metrics.push(service: service, kind: kind.rawValue, delivery: delivery, seconds: seconds)
        var fields = extra.merging(["request": request, "service": service, "kind": kind.rawValue,
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

    private func firstAuthError(service: String, reason: String) -> Bool {
        let generation = (try? services.apns?.providerToken.current().generation).map(String.init) ?? "-"
        return loggedAuthErrors.withLock { Self.firstTime("\(service)|\(generation)|\(reason)", in: &$0) }
    }

    /// Credential errors remembered at most (then forgotten, so each may be logged again).
    static let maximumLoggedAuthErrors = 1_000

    /// Whether `key` is new to `seen`, which never holds more than `limit` keys.
    static func firstTime(_ key: String, in seen: inout Set<String>, limit: Int = maximumLoggedAuthErrors) -> Bool {
        if seen.count >= limit, !seen.contains(key) { seen.removeAll() }
        return seen.insert(key).inserted
    }
}
