import JSON

/// The tools `tools/list` publishes: their input and output schemas (every result a tool
/// returns is valid against its `outputSchema`) and honest annotations.
extension MCPHandler {
    static let toolDescription = """
        Ask the user's phone where it is. The user must approve on their phone (unless they \
        always allow this agent), so a slow answer is normal: it can take minutes, and many MCP \
        clients stop waiting after 60 seconds. So each call waits at most about 45 seconds: if \
        the person has not answered by then, the result is not an error but says "no answer \
        yet" and gives a request_id; call get_phone_location again with only that request_id \
        to keep waiting for the same request (the person is not asked twice). If a call failed \
        or timed out on your side, just call again: it joins the request already waiting and \
        asks nobody twice. Pass `person` (a name or email) to locate someone who shares their \
        location with the user.
        """

    /// The fix `get_phone_location` returns as `structuredContent` (the 200 body of
    /// POST /v1/locate): every result it returns is valid against it.
    static var fixSchema: JSONValue { [
        "type": "object", "additionalProperties": false,
        "required": ["latitude", "longitude", "accuracy_m", "captured_at", "age_s", "device", "precision"],
        "properties": [
            "latitude": ["type": "number", "minimum": -90, "maximum": 90],
            "longitude": ["type": "number", "minimum": -180, "maximum": 180],
            "accuracy_m": ["type": "number", "minimum": 0, "description": "Radius of the fix's uncertainty, in metres."],
            "captured_at": ["type": "string", "format": "date-time", "description": "When the phone took the fix."],
            "age_s": ["type": "number", "minimum": 0, "description": "Seconds between the fix and the answer."],
            "precision": ["type": "string", "enum": ["precise", "approximate"],
                          "description": "approximate: the person shared only the centre of a ~3 km grid cell."],
            "altitude_m": ["type": "number"],
            "speed_mps": ["type": "number", "minimum": 0],
            "heading_deg": ["type": "number", "minimum": 0, "exclusiveMaximum": 360],
            "device": deviceSchema,
            "person": personSchema,
        ],
    ] }

    /// The answering device, in a fix or a place answer.
    static var deviceSchema: JSONValue { [
        "type": "object", "additionalProperties": false, "required": ["name", "platform"], "properties": [
            "name": ["type": "string"], "platform": ["type": "string", "enum": ["ios", "android", "desktop", "web"]],
        ],
    ] }

    /// Whose location it is, in a fix or a place answer on a shared request.
    static var personSchema: JSONValue { [
        "type": "object", "additionalProperties": false, "required": ["name", "email"],
        "description": "Whose location it is, on requests for someone who shares with the user.",
        "properties": ["name": ["type": "string"], "email": ["type": "string"]],
    ] }

    /// A place answer (docs/protocol.md, "Places"): the name of a place the person defined on their phone,
    /// shared instead of any position.
    static var placeSchema: JSONValue { [
        "type": "object", "additionalProperties": false,
        "required": ["place", "captured_at", "age_s", "device", "precision"],
        "properties": [
            "place": ["type": "string", "minLength": 1, "maxLength": 40,
                      "description": "The name the person gave the place their phone is in; no coordinates are shared."],
            "precision": ["type": "string", "const": "place"],
            "captured_at": ["type": "string", "format": "date-time", "description": "When the phone knew it was there."],
            "age_s": ["type": "number", "minimum": 0, "description": "Seconds between then and the answer."],
            "device": deviceSchema,
            "person": personSchema,
        ],
    ] }

    /// The "no answer yet" shape of a call that reached its wait bound (docs/protocol.md, "Durable requests").
    static var waitingSchema: JSONValue { [
        "type": "object", "additionalProperties": false, "required": ["status", "request_id", "expires_at"],
        "properties": [
            "status": ["type": "string", "const": "waiting"],
            "request_id": ["type": "string", "pattern": "^wbr_[A-Za-z0-9_-]{32}$",
                           "description": "Pass it back as request_id to wait for this request's answer."],
            "expires_at": ["type": "string", "format": "date-time", "description": "Until when the person may answer."],
        ],
    ] }

    /// What `get_phone_location` returns as `structuredContent`: the fix, a place, or the
    /// waiting shape.
    static var locateSchema: JSONValue { ["type": "object", "anyOf": [fixSchema, placeSchema, waitingSchema]] }

    /// The people `list_people_sharing_with_me` returns as `structuredContent`.
    static var peopleSchema: JSONValue { [
        "type": "object", "additionalProperties": false, "required": ["people"],
        "properties": ["people": ["type": "array", "items": [
            "type": "object", "additionalProperties": false, "required": ["name", "email"],
            "properties": ["name": ["type": "string"], "email": ["type": "string"]],
        ]]],
    ] }

    /// Both tools. Their annotations say honestly what they do: asking for a location pings
    /// a person's phone (not read-only, not idempotent: each call asks again, and reaches
    /// outside the relay); listing who shares with the user only reads.
    /// `taskSupport`: 2025-11-25's `execution.taskSupport` (the 2026-07-28 tasks extension
    /// has no such field: the server decides per call).
    static func tools(taskSupport: Bool) -> [JSONValue] {
        var locate: [String: JSONValue] = [
            "name": "get_phone_location", "title": "Get phone location", "description": .string(toolDescription),
            "inputSchema": ["type": "object", "additionalProperties": false, "properties": [
                "timeout_secs": ["type": "integer", "minimum": 1, "maximum": 120, "default": 60,
                                 "description": "Seconds the person has to answer (1 to 120; up to 600 when called as a task)."],
                "person": ["type": "string", "description": "Name or email of someone who shares their location with the user."],
                "reason": ["type": "string",
                           "description": "Why you ask, in a few words the person reads on their phone (at most 120 characters)."],
                "request_id": ["type": "string", "pattern": "^wbr_[A-Za-z0-9_-]{32}$",
                               "description": "The request_id of an earlier call that had no answer yet: waits for that request."],
            ]],
            "outputSchema": locateSchema,
            "annotations": ["title": "Get phone location", "readOnlyHint": false, "destructiveHint": false,
                            "idempotentHint": false, "openWorldHint": true]]
        if taskSupport { locate["execution"] = ["taskSupport": "optional"] }
        return [.object(locate),
        ["name": "list_people_sharing_with_me", "title": "List people sharing with me",
         "description": "The people (name and email) who share their location with the user.",
         "inputSchema": ["type": "object", "additionalProperties": false, "properties": [:]],
         "outputSchema": peopleSchema,
         "annotations": ["title": "List people sharing with me", "readOnlyHint": true, "destructiveHint": false,
                         "idempotentHint": true, "openWorldHint": false]],
        ]
    }
}
