import Foundation
import RelayCore

/// One locate as the agent asked it: whose phones, who asks, for how long, and, for a
/// durable request, how it outlives its call. A plain value, held by the driver for each
/// call (the waiters' value keeps what it decides with: `WaiterState.Request`).
public struct LocateRequest: Sendable {
    /// Whose phones to ask.
    public var owner: UUID
    /// Who asks, when it is someone else (location sharing).
    public var requester: UUID?
    /// The asking agent's client id.
    public var clientID: String
    /// The agent's name, for pushes.
    public var clientName: String?
    /// The credential's email, for the 503 text.
    public var email: String?
    /// How long the phone has to answer.
    public var timeout: Duration
    /// How the request outlives its call, when it may (nil: a synchronous request).
    public var resumable: Resumable?
    /// The agent's reason for asking, cleaned (`LocateReason`); nil for none.
    public var reason: String?
    /// The agent key that asks, if one does: revoking it ends the call (`keyRevoked`).
    public var agentKey: UUID?

    /// Creates a request.
    public init(owner: UUID, requester: UUID? = nil, clientID: String, clientName: String? = nil,
                email: String? = nil, timeout: Duration, resumable: Resumable? = nil, reason: String? = nil,
                agentKey: UUID? = nil) {
        self.agentKey = agentKey
        self.reason = reason
        self.owner = owner
        self.requester = requester
        self.clientID = clientID
        self.clientName = clientName
        self.email = email
        self.timeout = timeout
        self.resumable = resumable
    }

    /// A request that keeps its result for the agent's token (docs/protocol.md, "Durable requests").
    public struct Resumable: Sendable {
        /// The agent's request_id: the row id and the reply key come from it.
        public var token: RequestToken
        /// Who may come back for it.
        public var binding: RelayDatabase.Binding
        /// How long the call itself waits before it answers "still waiting" (nil: not at
        /// all, a task or an async HTTP request, durable from the start).
        public var callBound: Duration?
        /// The result's TTL from creation (a task's `ttl`), cut to the deadline plus 10 minutes.
        public var ttl: Duration?
        /// The token's secret wrapped under REQUEST_ID_KEY, when one is configured: for tasks/list
        /// (a listed task), and for a call's request, which a repeated ask on any instance joins.
        public var wrapped: [UInt8]?

        /// Describes a resumable request.
        public init(token: RequestToken, binding: RelayDatabase.Binding, callBound: Duration?, ttl: Duration? = nil,
                    wrapped: [UInt8]? = nil) {
            self.token = token
            self.binding = binding
            self.callBound = callBound
            self.ttl = ttl
            self.wrapped = wrapped
        }
    }
}

extension WaiterState.Request {
    /// What the waiters' value needs of `request`.
    init(_ request: LocateRequest) {
        self.init(owner: request.owner, email: request.email, timeout: request.timeout,
                  callBound: request.resumable?.callBound, resumable: request.resumable != nil)
    }
}

extension WaiterState.Waiter {
    /// A call of `request` (see `init(request:publicKey:expiresAt:calledAt:)`).
    init(request: LocateRequest, publicKey: [UInt8], expiresAt: Date, calledAt: ContinuousClock.Instant) {
        self.init(request: WaiterState.Request(request), publicKey: publicKey, expiresAt: expiresAt, calledAt: calledAt)
    }
}
