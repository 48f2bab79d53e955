import Foundation
import RelayCore
/// The OpenAPI 3.1 description of the relay's plain-HTTP routes (docs/protocol.md), built from
/// the code's own statuses, limits and texts — `AgentFailure`, `RelayRoutes` and
/// `AgentGate` — so the texts exist once. Served at `/openapi.yaml`, printed by
/// `whereabot openapi`, committed as docs/openapi.yaml (a test keeps the three equal).
public enum OpenAPIDocument {
    /// The document.
    public static var yaml: String { document.text }

    private static let example = Person(userID: nil, name: "Ada", email: "ada@example.com")

    private static var document: YAML {
        .map([
            ("openapi", .string("3.1.0")),
            ("info", .map([
                ("title", .string("Whereabot relay")),
                ("version", .string(Relay.version)),
                ("description", .string("""
                    Ask where a person's phone is, with their consent every time. An agent calls POST /v1/locate \
                    (or the MCP tool get_phone_location at /mcp); the person's phone asks them; the first answer \
                    comes back. Every non-200 answer of /v1/locate is text/plain, written for the agent to relay \
                    to its user. The phone side (GET /v1/device) is a WebSocket, described in docs/protocol.md (The device protocol).
                    """)),
                ("license", .map([("name", .string("See the repository"))])),
            ])),
            ("servers", .list([.map([("url", .string("/"))])])),
            ("security", .list([.map([("bearer", .list([]))])])),
            ("paths", .map([
                ("/v1/locate", .map([("post", locate)])),
                ("/v1/locate/requests/{request_id}", .map([("get", pollRequest), ("delete", cancelRequest)])),
                ("/v1/device/answer", .map([("post", deviceAnswer)])),
                ("/mcp", .map([("post", mcp)])),
                ("/.well-known/oauth-protected-resource", .map([("get", metadata(for: "/mcp"))])),
                ("/.well-known/oauth-protected-resource/mcp", .map([("get", metadata(for: "/mcp"))])),
                ("/healthz", .map([("get", plain("Process up", status: 200, text: "ok"))])),
                ("/readyz", .map([("get", readyz)])),
                ("/metrics", .map([("get", metrics)])),
                ("/openapi.yaml", .map([("get", openapi)])),
            ] + oauthPaths)),
            ("components", components),
        ])
    }

    // MARK: Routes

    private static let reasonDescription = """
        Why the agent asks, shown to the person as the agent's own words (the query's, else the JSON body's). \
        Cleaned: control characters become spaces, bidi controls are removed, whitespace collapses; \
        at most \(LocateReason.maximumLength) characters after cleaning.
        """

    private static var locate: YAML {
        .map([
            ("operationId", .string("locate")),
            ("summary", .string("Ask the user's phone (or a person who shares with the user) where it is")),
            ("description", .string(asyncDescription)),
            ("parameters", .list([
                .map([("name", .string("timeout_secs")), ("in", .string("query")), ("required", .bool(false)),
                      ("description", .string("How long the phone has to answer, in whole seconds (default \(AgentRoutes.defaultTimeout); values above \(AgentRoutes.maximumTimeout) wait \(AgentRoutes.maximumTimeout)). With Prefer: respond-async: default \(DurableRoutes.defaultTimeout), at most \(DurableRoutes.maximumTimeout).")),
                      ("schema", .map([("type", .string("integer")), ("minimum", .int(1))]))]),
                .map([("name", .string("person")), ("in", .string("query")), ("required", .bool(false)),
                      ("description", .string("Someone who shares their location with the agent's user: an email, or a display name.")),
                      ("schema", .map([("type", .string("string")), ("maxLength", .int(320))]))]),
                .map([("name", .string("reason")), ("in", .string("query")), ("required", .bool(false)),
                      ("description", .string(reasonDescription)), ("schema", .map([("type", .string("string"))]))]),
                preferHeader,
            ])),
            ("requestBody", .map([("required", .bool(false)),
                                  ("content", .map([("application/json", .map([("schema", .map([
                                      ("type", .string("object")), ("additionalProperties", .bool(false)),
                                      ("properties", .map([("reason", .map([("type", .string("string")),
                                                                              ("description", .string(reasonDescription))]))]))]))]))]))])),
            ("responses", .map([
                ("200", .map([("description", .string("The fix")),
                              ("content", .map([("application/json", .map([("schema", .map([("oneOf", .list([ref("Fix"), ref("Place")]))]))]))]))])),
                ("202", accepted),
                ("400", text("A bad timeout_secs, a reason too long or a body that is not {\"reason\": …}",
                             [AgentRoutes.timeoutText, AgentRoutes.asyncTimeoutText, LocateReason.tooLongText,
                              AgentRoutes.ReasonRefusal.body.text])),
                ("401", text("No valid credential", [AgentFailure.badCredential.agentText], headers: [wwwAuthenticate])),
                ("403", text("The person declined", [AgentFailure.declined.agentText, AgentFailure.personDeclined(example.name).agentText])),
                ("404", text("Nobody by that name shares with the user", [AgentFailure.nobodyNamed("Ada").agentText])),
                ("408", text("The person did not answer on their phone", [AgentFailure.noAnswer.agentText])),
                ("409", text("Several people by that name share with the user",
                             [AgentFailure.ambiguousPerson("Al", [Person(userID: nil, name: "Al", email: "al@one.example"),
                                                                  Person(userID: nil, name: "al", email: "al@two.example")]).agentText])),
                ("424", text("The phone could not share a location", [AgentFailure.permissionOff.agentText, AgentFailure.noFix.agentText])),
                ("429", text("Too many requests waiting, or too many failed authentications",
                             [AgentFailure.tooManyWaiting.agentText, RelayError.rateLimited(retryAfter: 0).text], headers: [retryAfter])),
                ("503", text("No phone connected, the person is in quiet hours, or the relay cannot serve now",
                             [AgentFailure.notConnected(email: example.email).agentText, AgentFailure.notConnected(email: nil).agentText,
                              AgentFailure.quietHours(name: example.name, until: Date(timeIntervalSince1970: 0), local: "07:00").agentText,
                              RelayError.draining.text, RelayError.databaseUnreachable.text, RelayError.cannotCheckCredentials.text],
                             headers: [retryAfter])),
                ("504", text("A phone got the request but nobody answered in time", [AgentFailure.phoneSilent.agentText])),
            ])),
        ])
    }

    private static var deviceAnswer: YAML {
        .map([
            ("operationId", .string("answerWithoutSocket")),
            ("summary", .string("A phone answers one request, or a reminder, without its socket (from a notification action)")),
            ("description", .string("""
                Needs the phone's own credential (no client_id). The first answer wins. A reminder of a standing \
                grant (docs/protocol.md, Reminders) is answered here too: Keep or Remove.
                """)),
            ("requestBody", .map([("required", .bool(true)),
                                  ("content", .map([("application/json", .map([("schema", .map([
                                      ("oneOf", .list([ref("PhoneAnswer"), ref("ReminderAnswer")])),
                                  ]))]))]))])),
            ("responses", .map([
                ("204", .map([("description", .string("The answer settled the request, or the reminder's answer was taken"))])),
                ("400", text("Not an answer", [PhoneRoutes.answerNotAnswerText])),
                ("401", text("No valid credential", [AgentFailure.badCredential.agentText], headers: [wwwAuthenticate])),
                ("403", text("An agent's credential, a removed device's session, or another user's request",
                             [PhoneRoutes.agentCannotAnswerText, PhoneRoutes.deviceRemovedText, PhoneRoutes.answerForbiddenText])),
                ("410", text("No request waits under this id; Keep for a grant that is no longer for good",
                             [PhoneRoutes.answerGoneText, PhoneRoutes.reminderGoneText])),
                ("415", text("The body is not JSON", [PhoneRoutes.answerNotJSONText])),
                ("422", text("Not a known message", [PhoneRoutes.answerUnknownText])),
                ("429", text("Too many failed authentications", [RelayError.rateLimited(retryAfter: 0).text], headers: [retryAfter])),
                ("503", text("The relay cannot serve now", [RelayError.databaseUnreachable.text, RelayError.cannotCheckCredentials.text],
                             headers: [retryAfter])),
            ])),
        ])
    }

    private static var mcp: YAML {
        .map([
            ("operationId", .string("mcp")),
            ("summary", .string("MCP over Streamable HTTP (stateless, JSON responses): tools get_phone_location and list_people_sharing_with_me")),
            ("requestBody", .map([("required", .bool(true)),
                                  ("content", .map([("application/json", .map([("schema", ref("JSONRPCMessage"))]))]))])),
            ("responses", .map([
                ("200", .map([("description", .string(
                    "A JSON-RPC response (tool failures are results with isError: true); a tools/call with "
                        + "params._meta.progressToken from a client that accepts text/event-stream is answered as Server-Sent "
                        + "Events: notifications/progress while the person has not answered, then the response.")),
                              ("content", .map([
                                ("application/json", .map([("schema", .map([("type", .string("object"))]))])),
                                ("text/event-stream", .map([("schema", .map([("type", .string("string"))]))])),
                              ]))])),
                ("202", .map([("description", .string("A notification was accepted"))])),
                ("400", .map([("description", .string("Not a JSON-RPC 2.0 request or notification (or a batch)")),
                              ("content", .map([("application/json", .map([("schema", ref("JSONRPCError"))]))]))])),
                ("401", text("No valid credential", [AgentFailure.badCredential.agentText], headers: [wwwAuthenticate])),
                ("403", text("A browser Origin that is not allowed", ["Origin not allowed."])),
                ("429", text("Too many failed authentications", [RelayError.rateLimited(retryAfter: 0).text], headers: [retryAfter])),
                ("503", text("The relay cannot serve now", [RelayError.draining.text, RelayError.cannotCheckCredentials.text], headers: [retryAfter])),
            ])),
        ])
    }

    private static func metadata(for resource: String) -> YAML {
        .map([
            ("summary", .string("RFC 9728 protected resource metadata (where agents get OAuth tokens)")),
            ("security", .list([])),
            ("responses", .map([("200", .map([("description", .string("The metadata")),
                                             ("content", .map([("application/json", .map([("schema", ref("ResourceMetadata"))]))]))]))])),
        ])
    }

    private static var readyz: YAML {
        .map([("summary", .string("Ready: database reachable, LISTEN up, signing keys read, not draining")), ("security", .list([])),
              ("responses", .map([("200", text("Ready", ["ready"])),
                                  ("503", text("Not ready: one line per thing missing, each naming where and why",
                                               ["draining\n", "database 127.0.0.1:54322: connection refused\n",
                                                "database listener 127.0.0.1:54322: connecting\n",
                                                "signing keys https://project.supabase.co/auth/v1/.well-known/jwks.json: timeout\n"],
                                               headers: [retryAfter]))]))])
    }

    private static var metrics: YAML {
        .map([("summary", .string("Prometheus metrics (labels carry no user data)")), ("security", .list([])),
              ("responses", .map([("200", .map([("description", .string("Prometheus text")),
                                               ("content", .map([("text/plain", .map([("schema", .map([("type", .string("string"))]))]))]))]))]))])
    }

    private static var openapi: YAML {
        .map([("summary", .string("This document")), ("security", .list([])),
              ("responses", .map([("200", .map([("description", .string("OpenAPI 3.1, YAML")),
                                               ("content", .map([("application/yaml", .map([("schema", .map([("type", .string("string"))]))]))]))]))]))])
    }

    static func plain(_ summary: String, status: Int, text body: String) -> YAML {
        .map([("summary", .string(summary)), ("security", .list([])), ("responses", .map([(String(status), text(summary, [body]))]))])
    }

    // MARK: Pieces

    static func ref(_ name: String) -> YAML { .map([("$ref", .string("#/components/schemas/\(name)"))]) }

    static let wwwAuthenticate = ("WWW-Authenticate", "Bearer resource_metadata=\"<PUBLIC_URL>/.well-known/oauth-protected-resource\"")
    static let retryAfter = ("Retry-After", "Seconds to wait before retrying")

    /// A text/plain response whose body is one of `texts` (each an example, the first the schema's).
    static func text(_ description: String, _ texts: [String], headers: [(String, String)] = []) -> YAML {
        var entries: [(String, YAML)] = [("description", .string(description))]
        if !headers.isEmpty {
            entries.append(("headers", .map(headers.map { name, about in
                (name, .map([("description", .string(about)), ("schema", .map([("type", .string(name == "Retry-After" ? "integer" : "string"))]))]))
            })))
        }
        let examples: [(String, YAML)] = texts.enumerated().map { index, text in ("text\(index + 1)", .map([("value", .string(text))])) }
        entries.append(("content", .map([("text/plain", .map([
            ("schema", .map([("type", .string("string"))])),
            ("examples", .map(examples)),
        ]))])))
        return .map(entries)
    }

    /// A field read leniently (a bad value makes a bad answer, never a refusal): described, not typed.
    private static func lenient(_ description: String) -> YAML { .map([("description", .string(description))]) }

    private static var components: YAML {
        let number: YAML = .map([("type", .string("number"))])
        return .map([
            ("securitySchemes", .map([("bearer", .map([
                ("type", .string("http")), ("scheme", .string("bearer")),
                ("description", .string("""
                    An agent: an OAuth 2.1 access token the relay issued to the agent (a JWT with client_id; see the \
                    protected-resource metadata), one Supabase Auth's OAuth server issued earlier, or an agent key \
                    (wb_…) the user created. A phone (and the person on the consent page and Connected agents): \
                    the user's own Supabase access token (a JWT without client_id).
                    """)),
            ]))])),
            ("schemas", .map([
                ("Waiting", waitingSchema),
                ("Fix", .map([
                    ("type", .string("object")),
                    ("required", .list(["latitude", "longitude", "accuracy_m", "captured_at", "age_s", "device", "precision"]
                        .map { .string($0) })),
                    ("properties", .map([
                        ("latitude", .map([("type", .string("number")), ("minimum", .int(-90)), ("maximum", .int(90))])),
                        ("longitude", .map([("type", .string("number")), ("minimum", .int(-180)), ("maximum", .int(180))])),
                        ("accuracy_m", .map([("type", .string("number")), ("minimum", .int(0))])),
                        ("captured_at", .map([("type", .string("string")), ("format", .string("date-time"))])),
                        ("age_s", .map([("type", .string("number")), ("minimum", .int(0))])),
                        ("precision", .map([("type", .string("string")), ("enum", .list([.string("precise"), .string("approximate")])),
                                            ("description", .string("approximate: the person shared only the centre of a 0.025° grid cell (accuracy_m at least 3000)"))])),
                        ("altitude_m", number), ("speed_mps", number), ("heading_deg", number),
                        ("device", ref("Device")), ("person", ref("Person")),
                    ])),
                ])),
                ("Place", .map([
                    ("description", .string("A place answer (docs/protocol.md, Places): the name of a place the person defined on their phone, and no position")),
                    ("type", .string("object")),
                    ("required", .list(["place", "captured_at", "age_s", "device", "precision"].map { .string($0) })),
                    ("properties", .map([
                        ("place", .map([("type", .string("string")), ("minLength", .int(1)), ("maxLength", .int(40))])),
                        ("precision", .map([("type", .string("string")), ("enum", .list([.string("place")]))])),
                        ("captured_at", .map([("type", .string("string")), ("format", .string("date-time"))])),
                        ("age_s", .map([("type", .string("number")), ("minimum", .int(0))])),
                        ("device", ref("Device")), ("person", ref("Person")),
                    ])),
                ])),
                ("Device", .map([("type", .string("object")), ("required", .list([.string("name"), .string("platform")])),
                                 ("properties", .map([("name", .map([("type", .string("string"))])),
                                                      ("platform", .map([("type", .string("string"))]))]))])),
                ("Person", .map([("description", .string("Whose location this is, on shared requests: name and verified email")),
                                 ("type", .string("object")), ("required", .list([.string("name"), .string("email")])),
                                 ("properties", .map([("name", .map([("type", .string("string"))])),
                                                      ("email", .map([("type", .string("string"))]))]))])),
                ("PhoneAnswer", .map([
                    ("description", .string("""
                        An answer to a locate, as a phone sends it on its socket (docs/protocol.md, Messages). Only type and id decide \
                        whether it is an answer; the other fields are read leniently, as on the socket: a location \
                        answer with a field that is missing, not a number or out of range is a bad answer and settles \
                        the request as unavailable (error), and an unknown reason counts as user (denied) or error \
                        (unavailable), so they carry no type here.
                        """)),
                    ("type", .string("object")),
                    ("required", .list([.string("type"), .string("id")])),
                    ("properties", .map([
                        ("type", .map([("type", .string("string")), ("enum", .list(["location", "denied", "unavailable"].map { .string($0) }))])),
                        ("id", .map([("description", .string("The locate's id")), ("type", .string("string")), ("format", .string("uuid"))])),
                        ("reason", lenient("denied: user or no_answer; unavailable: permission, no_fix or error")),
                        ("latitude", lenient("location: degrees, a number from -90 to 90")),
                        ("longitude", lenient("location: degrees, a number from -180 to 180")),
                        ("accuracy_m", lenient("location: meters, a number from 0")),
                        ("timestamp_ms", lenient("location: the capture time, epoch milliseconds (a whole number)")),
                        ("altitude_m", lenient("location, optional: meters (a number)")),
                        ("speed_mps", lenient("location, optional: meters per second, a number from 0")),
                        ("heading_deg", lenient("location, optional: degrees, a number from 0 to 360")),
                        ("precision", lenient("location, optional: precise (the default) or approximate, which needs accuracy_m of at least 3000, or place, which needs place and no latitude, longitude or accuracy_m (else the agent gets the no-fix answer)")),
                        ("place", lenient("location with precision place: the place's name, 1 to 40 characters once controls and invisible characters are removed")),
                    ])),
                ])),
                ("ReminderAnswer", .map([
                    ("description", .string("""
                        Keep or Remove on a reminder of a standing grant (docs/protocol.md, Reminders), as the phone sends it on its \
                        socket: Keep starts the reminder's interval again, Remove ends the always-allow.
                        """)),
                    ("type", .string("object")),
                    ("required", .list([.string("type"), .string("client_id")])),
                    ("properties", .map([
                        ("type", .map([("type", .string("string")),
                                       ("enum", .list(["always_allow_keep", "always_allow_remove"].map { .string($0) }))])),
                        ("client_id", .map([("description", .string("The agent's id, as the reminder names it")),
                                            ("type", .string("string")), ("minLength", .int(1)), ("maxLength", .int(255))])),
                        ("requester_id", .map([("description", .string("Whose agent, for shared locations; null for the account's own")),
                                               ("type", .list([.string("string"), .string("null")])), ("format", .string("uuid")),
                                               ("pattern", .string("^[0-9A-Fa-f]{8}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{12}$"))])),
                    ])),
                ])),
                ("JSONRPCMessage", .map([
                    ("description", .string("""
                        A JSON-RPC 2.0 request, or a notification (no id, answered 202). Batches (arrays) are refused \
                        with -32600, as is any message that breaks this schema.
                        """)),
                    ("type", .string("object")),
                    ("required", .list([.string("jsonrpc"), .string("method")])),
                    ("properties", .map([
                        ("jsonrpc", .map([("type", .string("string")), ("const", .string("2.0"))])),
                        ("id", .map([("type", .list([.string("string"), .string("number"), .string("null")]))])),
                        ("method", .map([("type", .string("string")), ("minLength", .int(1)),
                                         ("maxLength", .int(JSONRPCMessage.maximumMethodLength))])),
                        ("params", .map([("type", .list([.string("object"), .string("array")]))])),
                    ])),
                ])),
                ("JSONRPCError", .map([
                    ("description", .string("The error response to a message that is not JSON (-32700) or not a valid request (-32600)")),
                    ("type", .string("object")),
                    ("required", .list([.string("jsonrpc"), .string("id"), .string("error")])),
                    ("properties", .map([
                        ("jsonrpc", .map([("const", .string("2.0"))])),
                        ("id", .map([("type", .string("null"))])),
                        ("error", .map([
                            ("type", .string("object")),
                            ("required", .list([.string("code"), .string("message")])),
                            ("properties", .map([
                                ("code", .map([("enum", .list([.int(-32700), .int(-32600)]))])),
                                ("message", .map([("type", .string("string"))])),
                            ])),
                        ])),
                    ])),
                ])),
                ("ResourceMetadata", .map([
                    ("type", .string("object")),
                    ("required", .list([.string("resource"), .string("authorization_servers")])),
                    ("properties", .map([
                        ("resource", .map([("type", .string("string"))])),
                        ("authorization_servers", .map([("type", .string("array")), ("items", .map([("type", .string("string"))]))])),
                        ("bearer_methods_supported", .map([("type", .string("array")), ("items", .map([("type", .string("string"))]))])),
                        ("scopes_supported", .map([("type", .string("array")), ("items", .map([("type", .string("string"))]))])),
                    ])),
                ])),
            ] + oauthSchemas)),
        ])
    }
}
