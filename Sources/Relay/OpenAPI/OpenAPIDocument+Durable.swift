import RelayCore
/// The durable-request parts of the OpenAPI document (docs/protocol.md, "Durable requests"):
/// `Prefer: respond-async` on
/// POST /v1/locate, and GET / DELETE /v1/locate/requests/{request_id}.
extension OpenAPIDocument {
    static let asyncDescription = """
        Waits for the person's answer in the call, or, with Prefer: respond-async (RFC 7240), answers 202 at \
        once with a request_id and a Location to poll: the request then stays open until its own deadline \
        whoever holds the call, any relay instance answers the poll, and its result is kept (sealed) for up \
        to 10 minutes after the person answered.
        """

    static var preferHeader: YAML {
        .map([("name", .string("Prefer")), ("in", .string("header")), ("required", .bool(false)),
              ("description", .string("respond-async: answer 202 at once; fetch the outcome from the Location.")),
              ("schema", .map([("type", .string("string")), ("examples", .list([.string("respond-async")]))]))])
    }

    static var accepted: YAML {
        .map([("description", .string("Prefer: respond-async: the request is open; poll the Location (Retry-After: 2)")),
              ("headers", .map([
                ("Location", .map([("description", .string("/v1/locate/requests/{request_id}")),
                                   ("schema", .map([("type", .string("string"))]))])),
                ("Retry-After", .map([("description", .string("Seconds before the first poll")), ("schema", .map([("type", .string("integer"))]))])),
                ("Preference-Applied", .map([("schema", .map([("type", .string("string"))]))])),
              ])),
              ("content", .map([("application/json", .map([("schema", ref("Waiting"))]))]))])
    }

    static var waitingSchema: YAML {
        .map([
            ("type", .string("object")),
            ("required", .list(["status", "request_id", "expires_at"].map { .string($0) })),
            ("properties", .map([
                ("status", .map([("type", .string("string")), ("enum", .list([.string("waiting")]))])),
                ("request_id", .map([("description", .string("A credential: keep it secret; only the agent that opened the request can use it")),
                                     ("type", .string("string")), ("pattern", .string("^wbr_[A-Za-z0-9_-]{32}$"))])),
                ("expires_at", .map([("description", .string("Until when the person may answer")),
                                     ("type", .string("string")), ("format", .string("date-time"))])),
            ])),
        ])
    }

    private static var requestIDParameter: YAML {
        .map([("name", .string("request_id")), ("in", .string("path")), ("required", .bool(true)),
              ("schema", .map([("type", .string("string")), ("pattern", .string("^wbr_[A-Za-z0-9_-]{32}$"))]))])
    }

    static var pollRequest: YAML {
        .map([
            ("operationId", .string("pollLocateRequest")),
            ("summary", .string("The outcome of a request opened with Prefer: respond-async, waiting up to wait_secs for it")),
            ("parameters", .list([
                requestIDParameter,
                .map([("name", .string("wait_secs")), ("in", .string("query")), ("required", .bool(false)),
                      ("description", .string("Long poll: wait up to this many seconds for the outcome (default 0).")),
                      ("schema", .map([("type", .string("integer")), ("minimum", .int(0)),
                                       ("maximum", .int(DurableParams.maximumWaitSeconds))]))]),
            ])),
            ("responses", .map([
                ("200", .map([("description", .string("The fix")),
                              ("content", .map([("application/json", .map([("schema", ref("Fix"))]))]))])),
                ("202", .map([("description", .string("Still open: poll again (Retry-After: 2)")),
                              ("headers", .map([("Retry-After", .map([("schema", .map([("type", .string("integer"))]))]))])),
                              ("content", .map([("application/json", .map([("schema", ref("Waiting"))]))]))])),
                ("400", text("A malformed request id or wait_secs", [ResumeText.malformedRequestID, ResumeText.waitSeconds])),
                ("401", text("No valid credential", [AgentFailure.badCredential.agentText], headers: [wwwAuthenticate])),
                ("403", text("The person declined", [AgentFailure.declined.agentText])),
                ("404", text("Unknown to this credential: never opened, another agent's, cancelled with DELETE, or past its TTL",
                             [ResumeText.unknownRequest])),
                ("408", text("The person did not answer on their phone", [AgentFailure.noAnswer.agentText])),
                ("410", text("The request was cancelled (as an MCP task, or its share ended)", [ResumeText.cancelled])),
                ("424", text("The phone could not share a location", [AgentFailure.permissionOff.agentText, AgentFailure.noFix.agentText])),
                ("429", text("More than 2 polls a second of this request, or too many failed authentications",
                             [ResumeText.tooManyPolls, RelayError.rateLimited(retryAfter: 0).text], headers: [retryAfter])),
                ("503", text("No phone got the request, or the relay cannot serve now",
                             [AgentFailure.notConnected(email: nil).agentText, RelayError.draining.text,
                              RelayError.databaseUnreachable.text], headers: [retryAfter])),
                ("504", text("A phone got the request but nobody answered in time", [AgentFailure.phoneSilent.agentText])),
            ])),
        ])
    }

    static var cancelRequest: YAML {
        .map([
            ("operationId", .string("cancelLocateRequest")),
            ("summary", .string("Cancel a request (its phones get cancel) and forget it and its result")),
            ("parameters", .list([requestIDParameter])),
            ("responses", .map([
                ("204", .map([("description", .string("Cancelled (or already answered) and forgotten"))])),
                ("400", text("A malformed request id", [ResumeText.malformedRequestID])),
                ("401", text("No valid credential", [AgentFailure.badCredential.agentText], headers: [wwwAuthenticate])),
                ("404", text("Unknown to this credential", [ResumeText.unknownRequest])),
                ("503", text("The relay cannot serve now", [RelayError.draining.text, RelayError.databaseUnreachable.text],
                             headers: [retryAfter])),
            ])),
        ])
    }
}
