"""The agent says why (docs/protocol.md, "Consent"): `reason` on POST /v1/locate (query or JSON
body) and on get_phone_location (the official MCP SDK), cleaned, at most 120 characters, in the
ping a Python `websockets` phone reads, and never kept once the request settles."""
import asyncio
import json
import time
import urllib.error
import urllib.parse
import urllib.request
import uuid

import pytest
import websockets

from relay_server import RelayServer, token
from test_relay_mcp import sdk_client

TOO_LONG = "reason must be at most 120 characters after cleaning; shorten it."
BAD_BODY = 'The body of POST /v1/locate is empty or a JSON object such as {"reason": "…"}.'


@pytest.fixture
def relay():
    server = RelayServer()
    yield server
    server.stop()


def locate(base, agent, query="timeout_secs=10", body=None):
    request = urllib.request.Request(f"{base}/v1/locate?{query}", method="POST",
                                     data=body.encode() if body is not None else None)
    request.add_header("Authorization", f"Bearer {agent}")
    if body is not None:
        request.add_header("Content-Type", "application/json")
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode()


async def phone_pings(base, phone, count, answer=True):
    """The first `count` pings a phone gets, each answered "denied" (or left alone)."""
    pings = []
    async with websockets.connect(base.replace("http", "ws") + "/v1/device",
                                  additional_headers={"Authorization": f"Bearer {phone}"}) as ws:
        await ws.send(json.dumps({"type": "hello", "device_id": str(uuid.uuid4()), "device_name": "Phone",
                                  "platform": "android", "app_version": "1"}))
        while len(pings) < count:
            message = json.loads(await asyncio.wait_for(ws.recv(), 20))
            if message["type"] == "locate":
                pings.append(message)
                if answer:
                    await ws.send(json.dumps({"type": "denied", "id": message["id"], "reason": "user"}))
    return pings


def with_phone(relay, who, count, calls):
    """Runs `calls` (blocking agent calls, in a thread) while a phone answers; (pings, results)."""
    user, session, email = who

    async def scenario():
        task = asyncio.create_task(phone_pings(relay.base, token(user, session, email), count))
        await asyncio.sleep(0.5)
        results = await asyncio.to_thread(calls)
        return await asyncio.wait_for(task, 20), results

    return asyncio.run(scenario())


def test_the_phone_reads_the_reason_cleaned_from_the_query_and_the_body(relay, make_user, admin):
    who = make_user("Ada", with_session=True)
    agent = token(*who, client_id=str(uuid.uuid4()))
    hostile = "To pick\tyou up\r\n at <img src=x onerror=alert(1)> \u202eevil\u2066 "
    pings, results = with_phone(relay, who, 3, lambda: [
        locate(relay.base, agent, "timeout_secs=10&reason=" + urllib.parse.quote(hostile)),
        locate(relay.base, agent, body=json.dumps({"reason": "Dinner is ready"})),
        locate(relay.base, agent),
    ])
    assert [status for status, _ in results] == [403, 403, 403]
    assert pings[0]["reason"] == "To pick you up at <img src=x onerror=alert(1)> evil", "markup stays text; controls go"
    assert pings[1]["reason"] == "Dinner is ready"
    assert "reason" not in pings[2], "no reason, no key"
    ids = [ping["id"] for ping in pings]
    rows = admin.execute("select count(*) from relay.pending_requests where id = any(%s) and ask_reason is not null",
                         ([uuid.UUID(i) for i in ids],)).fetchone()[0]
    assert rows == 0, "a settled request keeps no reason"


def test_a_reason_too_long_or_a_bad_body_is_refused_before_any_phone_is_asked(relay, make_user):
    who = make_user("Bob", with_session=True)
    agent = token(*who, client_id=str(uuid.uuid4()))
    assert locate(relay.base, agent, "timeout_secs=1&reason=" + "x" * 121) == (400, TOO_LONG)
    assert locate(relay.base, agent, body=json.dumps({"reason": "x" * 10_000})) == (400, TOO_LONG)
    assert locate(relay.base, agent, "timeout_secs=1&reason=" + "x" * 10_000)[0] == 400, "past the start line's 8 KiB"
    assert locate(relay.base, agent, body=json.dumps({"reason": "🚉" * 121})) == (400, TOO_LONG)
    assert locate(relay.base, agent, body="<reason>") == (400, BAD_BODY)
    assert locate(relay.base, agent, body=json.dumps({"reason": ["x"]})) == (400, BAD_BODY)
    # 120 emoji after cleaning are allowed (no phone: 503, the request was opened).
    assert locate(relay.base, agent, "timeout_secs=1&reason=" + urllib.parse.quote("🚉" * 120 + "\n\n"))[0] == 503


def test_the_mcp_sdk_passes_a_reason_and_reads_the_limit_as_a_tool_error(relay, make_user):
    who = make_user("Cy", with_session=True)
    agent = token(*who, client_id=str(uuid.uuid4()))

    def calls():
        async def run():
            async with sdk_client(relay.base, agent, "auto") as client:
                tools = {tool.name: tool for tool in (await client.list_tools()).tools}
                schema = tools["get_phone_location"].input_schema["properties"]["reason"]
                assert schema["type"] == "string" and "maxLength" not in schema
                asked = await client.call_tool("get_phone_location", {"timeout_secs": 10, "reason": "Are you home\nyet?"})
                too_long = await client.call_tool("get_phone_location", {"reason": "y" * 121})
                not_text = await client.call_tool("get_phone_location", {"reason": 7})
                return asked, too_long, not_text
        return asyncio.run(run())

    pings, (asked, too_long, not_text) = with_phone(relay, who, 1, calls)
    assert pings[0]["reason"] == "Are you home yet?"
    assert asked.is_error and asked.content[0].text == "The user declined to share their location."
    assert too_long.is_error and too_long.content[0].text == TOO_LONG
    assert not_text.is_error and not_text.content[0].text == "reason must be a string."
