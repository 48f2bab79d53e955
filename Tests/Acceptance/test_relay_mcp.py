"""The relay driven by clients nobody here wrote: the official MCP Python SDK as the agent,
Python `websockets` as the phone, PyJWT for the tokens, curl for plain HTTP."""
import asyncio
import json
import subprocess
import time
import uuid

import pytest
import websockets
from mcp import ClientSession
from mcp.client.streamable_http import create_mcp_http_client, streamable_http_client
from mcp.shared.exceptions import MCPError

from conftest import make_oauth_client
from relay_server import RelayServer, token


@pytest.fixture
def relay():
    server = RelayServer()
    yield server
    server.stop()


async def phone(base, user_token, answer, connected):
    """A phone that says hello and answers every locate with `answer(id)`."""
    url = base.replace("http", "ws") + "/v1/device"
    async with websockets.connect(url, additional_headers={"Authorization": f"Bearer {user_token}"}) as ws:
        await ws.send(json.dumps({"type": "hello", "app_version": "1.0", "device_id": str(uuid.uuid4()),
                                  "device_name": "Ada's Pixel", "platform": "android"}))
        connected.set()
        async for message in ws:
            ping = json.loads(message)
            if ping["type"] == "locate":
                reply = answer(ping["id"])
                if asyncio.iscoroutine(reply):
                    reply = await reply
                if reply:
                    await ws.send(json.dumps(reply))


def fix(request_id):
    return {"type": "location", "id": request_id, "latitude": 52.52, "longitude": 13.405, "accuracy_m": 9,
            "timestamp_ms": int(time.time() * 1000)}


async def streamed_call(relay, phone_token, answer, agent, on_progress, call):
    """A phone that answers with `answer`, then an MCP session of `agent` (the official SDK)
    asking for progress: `call(call_tool)` awaits the get_phone_location call as the
    test needs (the SDK then answers over SSE)."""
    connected = asyncio.Event()
    phone_task = asyncio.create_task(phone(relay.base, phone_token, answer, connected))
    await asyncio.wait_for(connected.wait(), 10)
    await asyncio.sleep(0.3)
    async with mcp_session(relay.base, agent) as streams:
        async with ClientSession(streams[0], streams[1]) as session_:
            await session_.initialize()
            await call(session_.call_tool("get_phone_location", {"timeout_secs": 20},
                                                    progress_callback=on_progress))
    phone_task.cancel()


def mcp_session(base, agent):
    """The SDK's Streamable HTTP transport with the bearer token on every request."""
    client = create_mcp_http_client(headers={"Authorization": f"Bearer {agent}"})
    return streamable_http_client(base + "/mcp", http_client=client)


async def connect(session_, mode):
    """`legacy`: the initialize handshake (2025-11-25). `default`: what the SDK's Client does
    by default: server/discover first, which the relay answers (2026-07-28)."""
    if mode == "default":
        discovered = await session_.discover()
        assert "2026-07-28" in discovered.supported_versions
        return discovered
    return await session_.initialize()


def sdk_client(base, agent, mode):
    """The SDK's high-level Client over Streamable HTTP with the bearer token."""
    from mcp import Client
    http = create_mcp_http_client(headers={"Authorization": f"Bearer {agent}"})
    return Client(streamable_http_client(base + "/mcp", http_client=http), mode=mode, cache=None)


@pytest.mark.parametrize("mode, version", [("auto", "2026-07-28"), ("2026-07-28", "2026-07-28"),
                                           ("legacy", "2025-11-25"), ("2025-06-18", "2025-06-18")])
def test_mcp_sdk_locates_a_phone_and_lists_tools(relay, make_user, mode, version, monkeypatch):
    """The official SDK 2.3.0 in its default mode (2026-07-28 after server/discover), pinned
    to 2026-07-28, and in the handshake revisions it can offer (2025-11-25; 2025-06-18 by
    setting the version its initialize offers). It validates every fix against the tool's
    outputSchema."""
    user, session, email = make_user("Ada", with_session=True)
    agent = token(user, session, email, client_id=str(uuid.uuid4()))
    if mode == "2025-06-18":
        import mcp.client.session
        monkeypatch.setattr(mcp.client.session, "LATEST_HANDSHAKE_VERSION", "2025-06-18")
        mode = "legacy"

    async def scenario():
        connected = asyncio.Event()
        phone_task = asyncio.create_task(phone(relay.base, token(user, session, email), fix, connected))
        await asyncio.wait_for(connected.wait(), 10)
        await asyncio.sleep(0.3)
        async with sdk_client(relay.base, agent, mode) as client:
            assert client.protocol_version == version
            if mode != "2026-07-28":  # pinned, the SDK asks nothing before its first call
                assert client.server_info.name == "whereabot"
            tools = {tool.name: tool for tool in (await client.list_tools()).tools}
            assert set(tools) == {"get_phone_location", "list_people_sharing_with_me"}
            assert "60 seconds" in tools["get_phone_location"].description
            assert tools["get_phone_location"].annotations.read_only_hint is False
            assert tools["list_people_sharing_with_me"].annotations.read_only_hint is True
            fix_shape, place_shape, waiting_shape = tools["get_phone_location"].output_schema["anyOf"]
            assert fix_shape["required"][:2] == ["latitude", "longitude"]
            assert place_shape["required"][0] == "place" and "latitude" not in place_shape["properties"]
            assert waiting_shape["required"] == ["status", "request_id", "expires_at"]
            result = await client.call_tool("get_phone_location", {"timeout_secs": 10})
            assert not result.is_error
            located = json.loads(result.content[0].text)
            assert (located["latitude"], located["longitude"]) == (52.52, 13.405)
            assert located["device"] == {"name": "Ada's Pixel", "platform": "android"}
            assert result.structured_content["accuracy_m"] == 9
            people = await client.call_tool("list_people_sharing_with_me", {})
            assert not people.is_error and people.structured_content == {"people": []}
        phone_task.cancel()

    asyncio.run(asyncio.wait_for(scenario(), 60))


def test_mcp_tool_errors_carry_the_agent_text(relay, make_user):
    user, session, email = make_user("Bob", with_session=True)
    agent = token(user, session, email, client_id=str(uuid.uuid4()))

    async def scenario():
        async with mcp_session(relay.base, agent) as streams:
            async with ClientSession(streams[0], streams[1]) as session_:
                await connect(session_, "default")
                result = await session_.call_tool("get_phone_location", {"timeout_secs": 1})
                assert result.is_error
                assert result.content[0].text == (
                    f"The user's phone is not connected. Ask the user to open the Whereabot app, signed in as {email} "
                    "and keep it open, then retry.")
                people = await session_.call_tool("list_people_sharing_with_me", {})
                assert not people.is_error and people.structured_content == {"people": []}

    asyncio.run(asyncio.wait_for(scenario(), 60))


def curl(*args):
    result = subprocess.run(["curl", "-s", "-o", "/dev/stdout", "-w", "\n%{http_code}", *args],
                            capture_output=True, text=True, timeout=30)
    body, _, status = result.stdout.rpartition("\n")
    return int(status), body


def test_mcp_http_rules_with_curl(relay, make_user):
    user, session, email = make_user("Cy", with_session=True)
    agent = token(user, session, email, client_id=str(uuid.uuid4()))
    auth = ["-H", f"Authorization: Bearer {agent}", "-H", "Content-Type: application/json"]
    assert curl("-X", "GET", relay.base + "/mcp")[0] == 405
    assert curl("-X", "DELETE", relay.base + "/mcp")[0] == 405
    status, _ = curl("-X", "POST", relay.base + "/mcp", "-d", "{}")
    assert status == 401
    status, body = curl("-X", "POST", relay.base + "/mcp", *auth, "-d", '[{"jsonrpc":"2.0","id":1,"method":"ping"}]')
    assert status == 400 and json.loads(body)["error"]["code"] == -32600
    status, _ = curl("-X", "POST", relay.base + "/mcp", *auth, "-d", '{"jsonrpc":"2.0","method":"notifications/initialized"}')
    assert status == 202
    status, body = curl("-X", "POST", relay.base + "/mcp", *auth, "-d", '{"jsonrpc":"2.0","id":7,"method":"server/discover"}')
    assert status == 200 and json.loads(body)["error"]["code"] == -32601
    for version in ["2025-03-26", "2025-06-18", "2025-11-25"]:
        status, body = curl("-X", "POST", relay.base + "/mcp", *auth, "-d",
                            json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize",
                                        "params": {"protocolVersion": version, "capabilities": {},
                                                   "clientInfo": {"name": "curl", "version": "1"}}}))
        assert status == 200 and json.loads(body)["result"]["protocolVersion"] == version
    status, _ = curl("-X", "POST", relay.base + "/mcp", *auth, "-H", "Origin: https://evil.example", "-d", "{}")
    assert status == 403
    status, body = curl(relay.base + "/.well-known/oauth-protected-resource/mcp")
    assert status == 200 and json.loads(body)["resource"] == relay.base + "/mcp"


def test_sigterm_closes_phones_with_1012_restart(make_user):
    relay = RelayServer()
    user, session, email = make_user("Di", with_session=True)

    async def scenario():
        url = relay.base.replace("http", "ws") + "/v1/device"
        async with websockets.connect(url, additional_headers={"Authorization": f"Bearer {token(user, session, email)}"}) as ws:
            await ws.send(json.dumps({"type": "hello", "device_id": str(uuid.uuid4()), "platform": "ios"}))
            await asyncio.sleep(0.3)
            relay.process.terminate()
            with pytest.raises(websockets.exceptions.ConnectionClosed) as closed:
                await ws.recv()
            assert (closed.value.rcvd.code, closed.value.rcvd.reason) == (1012, "restart")

    asyncio.run(asyncio.wait_for(scenario(), 30))
    assert relay.process.wait(timeout=20) == 0
    logs = relay.process.stderr.read()
    assert "draining" in logs and email not in logs


def test_a_long_tool_call_reports_progress_to_the_sdk(make_user):
    """With a progress callback the SDK sends a progressToken: the relay answers over SSE,
    reports progress while the person has not tapped (here every second), then the fix."""
    relay = RelayServer(MCP_PROGRESS_SECONDS="1")
    user, session, email = make_user("Dee", with_session=True)
    agent = token(user, session, email, client_id=str(uuid.uuid4()))
    progress = []

    async def slow_fix(request_id):
        await asyncio.sleep(2.6)  # the person takes a while to tap Allow
        return fix(request_id)

    async def on_progress(value, total, message):
        progress.append((value, message))

    async def call(call_tool):
        result = await call_tool
        assert not result.is_error, result
        assert json.loads(result.content[0].text)["latitude"] == 52.52

    try:
        asyncio.run(asyncio.wait_for(streamed_call(relay, token(user, session, email), slow_fix, agent, on_progress, call), 60))
    finally:
        relay.stop()
    assert len(progress) >= 2, progress
    assert [value for value, _ in progress] == sorted(value for value, _ in progress)
    assert progress[0][1] == "Waiting for the person to answer on their phone."


def test_a_streamed_tool_call_whose_session_ended_gets_no_location(make_user, admin):
    """Hostile input round 3: a tool call answered over SSE (the SDK
    asked for progress) whose session is signed out while the person has not tapped yet
    gets the revoked-credential error, not the fix the phone sends afterwards: the
    credential is checked again before the result goes out, as for a plain reply. (Another
    session of the same client lives on, so the grant itself stands and the request is not
    cancelled: only this token's session ended.)"""
    relay = RelayServer(MCP_PROGRESS_SECONDS="1")
    user, phone_session, email = make_user("Dee", with_session=True)
    client = str(uuid.uuid4())
    make_oauth_client(admin, client, "Claude")
    signed_out, other = uuid.uuid4(), uuid.uuid4()
    for session in (signed_out, other):
        admin.execute("insert into auth.sessions (id, user_id, created_at, oauth_client_id) values (%s, %s, now(), %s)",
                      (session, user, client))
    agent = token(user, signed_out, email, client_id=client)

    async def late_fix(request_id):
        await asyncio.sleep(6)  # past the relay's 4-s cache of an agent's session
        return fix(request_id)

    async def on_progress(value, total, message):
        pass

    async def call(call_tool):
        pending = asyncio.create_task(call_tool)
        await asyncio.sleep(1)
        admin.execute("delete from auth.sessions where id = %s", (signed_out,))
        with pytest.raises(MCPError) as refused:
            await pending
        assert "revoked credential" in str(refused.value), refused.value

    try:
        asyncio.run(asyncio.wait_for(streamed_call(relay, token(user, phone_session, email), late_fix, agent, on_progress, call), 60))
    finally:
        relay.stop()
