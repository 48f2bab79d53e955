import Foundation
import HTTPServer
import RelayCore

/// The phones' routes: `GET /v1/device` (the socket, docs/protocol.md, "The socket") and
/// `POST /v1/device/answer` (one answer without a socket, from a notification action). A
/// draining instance refuses new sockets with 503.
struct PhoneRoutes: Sendable {
    let authenticator: Authenticator
    let driver: InstanceDriver
    /// Answers a reminder's Keep or Remove posted here.
    let account: PhoneAccount
    let gate: AgentGate
    let health: RelayHealth
    let logger: Logger
    /// Browser origins allowed to open phone sockets (PUBLIC_URL's and ALLOWED_ORIGINS).
    let allowedOrigins: Set<String>

    /// The texts of the phone routes; docs/openapi.yaml is built from these.
    static let answerNotJSONText = "The body must be a JSON message."
    static let answerNotAnswerText =
        "Only answers (location, denied, unavailable) and a reminder's Keep or Remove can be posted here."
    static let reminderGoneText = "No always-allow of this agent for good is left to keep."
    static let answerUnknownText = "Not a known message."
    static let answerGoneText = "No request waits under this id."
    static let answerForbiddenText = "That request belongs to another user."
    static let agentCannotAnswerText = "Agent credentials cannot answer."
    static let agentCannotConnectText = "Agent credentials cannot connect as a phone."
    static let deviceRemovedText = "This session was signed out by removing its device. Sign in again."

    /// One answer without a socket (from a notification action), or a reminder's Keep or
    /// Remove: 204 taken, 410 nothing for good left to keep (docs/protocol.md, "Without a
    /// socket", has every status).
    func deviceAnswer(_ request: HTTPRequest) async -> HTTPResponse {
        let phone: PhoneIdentity
        switch await phoneIdentity(request, agentText: Self.agentCannotAnswerText) {
        case .success(let identity): phone = identity
        case .failure(let refusal): return refusal.response
        }
        guard let message = PhoneMessage.parse(String(decoding: request.body, as: UTF8.self)) else {
            return RelayError.badInput(Self.answerNotJSONText, status: 415).response
        }
        switch message {
        case .account(.alwaysAllowKeep(let clientID, let requester)):
            return await answerReminder(keep: true, clientID: clientID, requester: requester, phone: phone)
        case .account(.alwaysAllowRemove(let clientID, let requester)):
            return await answerReminder(keep: false, clientID: clientID, requester: requester, phone: phone)
        case .hello, .log, .token, .account:
            return RelayError.badInput(Self.answerNotAnswerText).response
        case .unknown:
            return RelayError.badInput(Self.answerUnknownText, status: 422).response
        case .answer(let id, let reply):
            do {
                switch try await driver.answer(id: id, user: phone.userID, reply: reply) {
                case .settled: return HTTPResponse(status: 204)
                case .gone: return RelayError.gone(Self.answerGoneText).response
                case .forbidden: return RelayError.forbidden(Self.answerForbiddenText).response
                }
            } catch {
                logger.failure("device_answer_failed", error, ["request": id.uuidString])
                return RelayError.databaseUnreachable.response
            }
        }
    }

    private func answerReminder(keep: Bool, clientID: String, requester: UUID?, phone: PhoneIdentity) async -> HTTPResponse {
        do {
            if try await account.answerReminder(keep: keep, clientID: clientID, requester: requester, user: phone.userID) {
                return HTTPResponse(status: 204)
            }
            return RelayError.gone(Self.reminderGoneText).response
        } catch {
            logger.failure("reminder_answer_failed", error, [:])
            return RelayError.databaseUnreachable.response
        }
    }

    /// `GET /v1/device`: a phone's socket, or why not.
    func device(_ request: HTTPRequest) async -> HTTPResponse {
        // A browser's page may open the socket only from the relay's own origin (or an
        // allowed one): another site cannot use a signed-in page's token.
        if let origin = request.headers["Origin"], !allowedOrigins.contains(origin) {
            return RelayError.forbidden("Origin not allowed.").response
        }
        let credential = DeviceCredential.from(authorization: request.headers["Authorization"],
                                               protocols: request.headers["Sec-WebSocket-Protocol"])
        guard case .authorization(let authorization, let selectProtocol) = credential else {
            return RelayError.badInput("Offer one whereabot.bearer.<token> subprotocol together with whereabot.v1.").response
        }
        let response = await admitPhone(request, authorization: authorization, selectProtocol: selectProtocol)
        // "Come back in N s" reaches a phone that speaks whereabot.v1 on the socket (1013).
        if selectProtocol, request.isWebSocketUpgrade, let refusal = RetryLaterSocket.replacing(response) { return refusal }
        return response
    }

    /// A phone socket's upgrade, or why not: draining (503); its token (401, 403, 429 for an
    /// address over its failure budget, 503 when it cannot be checked); its account's or the
    /// relay's sockets waiting for a hello (429) — a place among them is taken, in order,
    /// once the token verified locally and before the session check, the database call that
    /// a reconnect storm multiplies — or its session (401, 403, 503).
    private func admitPhone(_ request: HTTPRequest, authorization: String?, selectProtocol: Bool) async -> HTTPResponse {
        if health.isDraining { return RelayError.draining.response }
        let phone: PhoneIdentity
        switch await phoneIdentity(request, authorization: authorization, agentText: Self.agentCannotConnectText,
                                   checkingSession: false) {
        case .success(let identity): phone = identity
        case .failure(let refusal): return refusal.response
        }
        guard request.isWebSocketUpgrade else { return .text(426, "Upgrade to a WebSocket.", headers: ["Upgrade": "websocket"]) }
        guard let ticket = await driver.waitingRoom.admit(account: phone.userID, address: request.remoteAddress) else {
            return RelayError.tooManyWaitingForHello.response
        }
        do {
            try await authenticator.phoneSession(phone, client: request.remoteAddress)
        } catch {
            return await phoneRefusal(error, request, agentText: Self.agentCannotConnectText).response
        }
        let headers: HTTPHeaders = selectProtocol ? ["Sec-WebSocket-Protocol": DeviceCredential.protocolName] : [:]
        return .webSocket(headers: headers, delegate: driver.session(for: phone, waiting: ticket))
    }

    /// The phone behind a phone route's bearer, or its refusal: 403 for an agent's
    /// credential and for a session revoked by removing its device, else as `AgentGate`.
    private func phoneIdentity(_ request: HTTPRequest, authorization: String?? = nil, agentText: String,
                               checkingSession: Bool = true) async -> Result<PhoneIdentity, AgentGate.Refusal> {
        do {
            return .success(try await authenticator.phone(authorization ?? request.headers["Authorization"],
                                                          client: request.remoteAddress, checkingSession: checkingSession))
        } catch {
            return .failure(await phoneRefusal(error, request, agentText: agentText))
        }
    }

    private func phoneRefusal(_ error: AuthError, _ request: HTTPRequest, agentText: String) async -> AgentGate.Refusal {
        switch error {
        case .wrongCredentialKind: AgentGate.Refusal(response: RelayError.forbidden(agentText).response)
        case .deviceRemoved: AgentGate.Refusal(response: RelayError.forbidden(Self.deviceRemovedText).response)
        default: AgentGate.Refusal(response: await gate.refusal(error, request))
        }
    }
}
