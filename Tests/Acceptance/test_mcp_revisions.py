"""POST /mcp per revision (docs/agents.md, "MCP revisions"), probed with raw HTTP (urllib) and
raw sockets: every 400 and 404 2026-07-28 names, the version rules of every revision, result
shapes, the 401 challenge, a closed stream that leaves the prompt (a hang-up, not a cancel), and
traceparent in the relay's log lines.
Before: each of these was answered 200 (or -32601 with HTTP 200 for server/discover)."""
import asyncio
import json
import socket
import urllib.error
import urllib.request
import uuid

import pytest
import websockets

from relay_server import RelayServer, token

MODERN = "2026-07-28"
META = {"io.modelcontextprotocol/protocolVersion": MODERN, "io.modelcontextprotocol/clientCapabilities": {},
        "io.modelcontextprotocol/clientInfo": {"name": "probe", "version": "1"}}


@pytest.fixture(scope="module")
def relay():
    server = RelayServer(LOG_LEVEL="debug")
    yield server
    server.stop()


@pytest.fixture
def agent(make_user):
    user, session, email = make_user("Probe", with_session=True)
    return token(user, session, email, client_id=str(uuid.uuid4()))


def post(relay, body, headers):
    request = urllib.request.Request(relay.base + "/mcp", data=json.dumps(body).encode(), method="POST",
                                     headers={"Content-Type": "application/json", "Accept": "application/json, text/event-stream",
                                              **headers})
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            text = response.read().decode()
            return response.status, json.loads(text) if text else None, dict(response.headers)
    except urllib.error.HTTPError as error:
        text = error.read().decode()
        try:
            return error.code, json.loads(text), dict(error.headers)
        except json.JSONDecodeError:
            return error.code, text, dict(error.headers)


def modern(relay, agent, method, params=None, meta=META, headers=None, request_id=1):
    body = {"jsonrpc": "2.0", "id": request_id, "method": method, "params": {**(params or {}), "_meta": meta}}
    if meta is None:
        del body["params"]["_meta"]
    sent = {"Authorization": f"Bearer {agent}", "MCP-Protocol-Version": MODERN, "Mcp-Method": method}
    if method == "tools/call":
        sent["Mcp-Name"] = (params or {}).get("name", "")
    sent.update(headers or {})
    return post(relay, body, {k: v for k, v in sent.items() if v is not None})


def code(answer):
    return answer[0], answer[1]["error"]["code"] if isinstance(answer[1], dict) and "error" in answer[1] else None


def test_server_discover_and_result_shapes(relay, agent):
    status, body, _ = modern(relay, agent, "server/discover")
    result = body["result"]
    assert status == 200 and body["id"] == 1
    assert result["resultType"] == "complete" and MODERN in result["supportedVersions"]
    assert result["_meta"]["io.modelcontextprotocol/serverInfo"]["name"] == "whereabot"
    assert result["capabilities"] == {"tools": {"listChanged": False}, "extensions": {"io.modelcontextprotocol/tasks": {}}}
    assert result["ttlMs"] >= 0 and result["cacheScope"] in ("public", "private")
    assert "serverInfo" not in result and "protocolVersion" not in result
    status, body, _ = modern(relay, agent, "tools/list")
    assert status == 200 and body["result"]["resultType"] == "complete" and body["result"]["cacheScope"] == "public"
    assert {tool["name"] for tool in body["result"]["tools"]} == {"get_phone_location", "list_people_sharing_with_me"}
    status, body, _ = modern(relay, agent, "tools/call", {"name": "list_people_sharing_with_me", "arguments": {}})
    assert status == 200 and body["result"]["resultType"] == "complete" and body["result"]["structuredContent"] == {"people": []}
    assert "io.modelcontextprotocol/serverInfo" in body["result"]["_meta"]


def test_every_refusal_of_2026_07_28(relay, agent):
    assert code(modern(relay, agent, "tools/list", headers={"MCP-Protocol-Version": "2026-01-01"})) == (400, -32020)
    status, body, _ = modern(relay, agent, "tools/list", meta={**META, "io.modelcontextprotocol/protocolVersion": "2099-01-01"},
                             headers={"MCP-Protocol-Version": "2099-01-01"})
    assert (status, body["error"]["code"], body["error"]["data"]["requested"]) == (400, -32022, "2099-01-01")
    assert MODERN in body["error"]["data"]["supported"]
    assert code(modern(relay, agent, "tools/list", headers={"Mcp-Method": None})) == (400, -32020)
    assert code(modern(relay, agent, "tools/list", headers={"Mcp-Method": "Tools/List"})) == (400, -32020)
    no_capabilities = {k: v for k, v in META.items() if k != "io.modelcontextprotocol/clientCapabilities"}
    assert code(modern(relay, agent, "tools/list", meta=no_capabilities)) == (400, -32602)
    assert code(modern(relay, agent, "tools/list", meta=None)) == (400, -32602)
    assert code(modern(relay, agent, "mcpcheck/nonexistent")) == (404, -32601)
    assert code(modern(relay, agent, "ping")) == (404, -32601), "ping and initialize are gone in 2026-07-28"
    assert code(modern(relay, agent, "initialize", {"protocolVersion": MODERN, "capabilities": {}})) == (404, -32601)
    call = {"name": "list_people_sharing_with_me", "arguments": {}}
    assert code(modern(relay, agent, "tools/call", call, headers={"Mcp-Name": None})) == (400, -32020)
    assert code(modern(relay, agent, "tools/call", call, headers={"Mcp-Name": "get_phone_location"})) == (400, -32020)
    encoded = "=?base64?bGlzdF9wZW9wbGVfc2hhcmluZ193aXRoX21l?="  # list_people_sharing_with_me
    assert modern(relay, agent, "tools/call", call, headers={"Mcp-Name": encoded})[0] == 200, "Mcp-Name is decoded"
    assert code(modern(relay, agent, "tools/call", {"name": "nope", "arguments": {}})) == (400, -32602)
    assert code(modern(relay, agent, "tools/list", request_id=None)) == (400, -32600), "ids must not be null"


def test_version_rules_of_the_handshake_revisions(relay, agent):
    initialize = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
                  "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "p", "version": "1"}}}
    status, body, _ = post(relay, initialize, {"Authorization": f"Bearer {agent}"})
    assert status == 200 and body["result"]["protocolVersion"] == "2025-06-18", "no header: 2025-03-26 rules, initialize works"
    assert "resultType" not in body["result"]
    ping = {"jsonrpc": "2.0", "id": 4, "method": "ping"}
    for version in ("2025-03-26", "2025-06-18", "2025-11-25"):
        assert post(relay, ping, {"Authorization": f"Bearer {agent}", "MCP-Protocol-Version": version})[:2] == \
            (200, {"jsonrpc": "2.0", "id": 4, "result": {}})
    for bad in ("1999-01-01", "2099-01-01", "junk"):
        assert post(relay, ping, {"Authorization": f"Bearer {agent}", "MCP-Protocol-Version": bad})[0] == 400
    listed = post(relay, {"jsonrpc": "2.0", "id": 2, "method": "tools/list"},
                  {"Authorization": f"Bearer {agent}", "MCP-Protocol-Version": "2025-11-25"})[1]["result"]
    assert "resultType" not in listed and "ttlMs" not in listed, "handshake revisions keep their result shape"
    unknown = post(relay, {"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "list_people_sharing_with_me",
                                                                                       "arguments": {"x": 1}}},
                   {"Authorization": f"Bearer {agent}", "MCP-Protocol-Version": "2025-11-25"})[1]["result"]
    assert unknown["isError"] is True and "Unknown argument x" in unknown["content"][0]["text"]


def test_401_challenges(relay):
    _, _, headers = post(relay, {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}, {})
    assert "error=" not in headers["WWW-Authenticate"], "no credential: no error code (RFC 6750 §3.1)"
    assert 'resource_metadata="' in headers["WWW-Authenticate"] and 'scope="' in headers["WWW-Authenticate"]
    _, _, headers = post(relay, {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}, {"Authorization": "Bearer nonsense"})
    assert 'error="invalid_token"' in headers["WWW-Authenticate"] and 'scope="' in headers["WWW-Authenticate"]


def test_closing_the_stream_is_a_hang_up_not_a_cancel(relay, make_user):
    """A hang-up is not a refusal (docs/protocol.md, "Answers and agent texts"): a client that
    closes the response stream (its own timeout, a dropped
    connection) leaves the person's prompt until the request's deadline; an explicit cancel
    is test_hang_up_and_join's."""
    user, session, email = make_user("Cancel", with_session=True)
    agent = token(user, session, email, client_id=str(uuid.uuid4()))

    async def scenario():
        async with websockets.connect(relay.base.replace("http", "ws") + "/v1/device",
                                      additional_headers={"Authorization": f"Bearer {token(user, session, email)}"}) as ws:
            await ws.send(json.dumps({"type": "hello", "device_id": str(uuid.uuid4()), "device_name": "P", "platform": "ios"}))
            await asyncio.sleep(0.3)
            body = json.dumps({"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {
                "name": "get_phone_location", "arguments": {"timeout_secs": 30}, "_meta": META}}).encode()
            host, port = relay.base.removeprefix("http://").split(":")
            conn = socket.create_connection((host, int(port)))
            conn.sendall((f"POST /mcp HTTP/1.1\r\nHost: {host}\r\nAuthorization: Bearer {agent}\r\n"
                          f"Content-Type: application/json\r\nAccept: application/json, text/event-stream\r\n"
                          f"MCP-Protocol-Version: {MODERN}\r\nMcp-Method: tools/call\r\nMcp-Name: get_phone_location\r\n"
                          f"Content-Length: {len(body)}\r\n\r\n").encode() + body)
            ping = json.loads(await asyncio.wait_for(ws.recv(), 5))
            assert ping["type"] == "locate"
            conn.close()  # the agent closes the response stream
            with pytest.raises(asyncio.TimeoutError):
                await asyncio.wait_for(ws.recv(), 2)  # no cancel: the prompt stays

    asyncio.run(scenario())


def test_traceparent_reaches_the_log_lines_of_its_request(make_user):
    server = RelayServer(LOG_LEVEL="debug")
    try:
        user, session, email = make_user("Trace", with_session=True)
        agent = token(user, session, email, client_id=str(uuid.uuid4()))
        trace = "00-0af7651916cd43dd8448eb211c80319c-00f067aa0ba902b7-01"
        modern(server, agent, "tools/list", meta={**META, "traceparent": trace})
        modern(server, agent, "tools/list", meta={**META, "traceparent": "not-a-traceparent"})
    finally:
        server.stop()
    lines = [json.loads(line) for line in server.logs.splitlines() if line.startswith("{")]
    requests = [line for line in lines if line["event"] == "mcp_request"]
    assert [line.get("traceparent") for line in requests] == [trace, None], "a malformed one is ignored"
