"""A caller that hangs up never withdraws the person's prompt, and a repeated ask joins the
request already waiting (docs/agents.md "Timeouts"): raw sockets and urllib as an
MCP client with a short timeout would behave, and Python `websockets` as the phone. An
explicit cancel (`notifications/cancelled` naming the call) still withdraws it; a join is
bound to the credential: another agent of the same person opens its own request."""
import asyncio
import base64
import json
import os
import socket
import time
import uuid

import pytest
import websockets

from relay_server import RelayServer, token
from test_mcp_revisions import META, MODERN, post

LAT, LON = 46.948, 7.4474


@pytest.fixture(scope="module")
def relay():
    server = RelayServer(MCP_WAIT_SECONDS="5")
    yield server
    server.stop()


def call_body(request_id, revision_meta=True, arguments=None):
    params = {"name": "get_phone_location", "arguments": arguments or {"timeout_secs": 60}}
    if revision_meta:
        params["_meta"] = META
    return {"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": params}


def open_call(relay, agent, body, version=MODERN):
    """Sends a tools/call on a raw socket and leaves it waiting; the socket (close it to hang up)."""
    data = json.dumps(body).encode()
    host, port = relay.base.removeprefix("http://").split(":")
    conn = socket.create_connection((host, int(port)))
    extra = f"Mcp-Method: tools/call\r\nMcp-Name: get_phone_location\r\n" if version == MODERN else ""
    conn.sendall((f"POST /mcp HTTP/1.1\r\nHost: {host}\r\nAuthorization: Bearer {agent}\r\n"
                  f"Content-Type: application/json\r\nAccept: application/json, text/event-stream\r\n"
                  f"MCP-Protocol-Version: {version}\r\n{extra}Content-Length: {len(data)}\r\n\r\n").encode() + data)
    return conn


async def phone(relay, user, session, email):
    ws = await websockets.connect(relay.base.replace("http", "ws") + "/v1/device",
                                  additional_headers={"Authorization": f"Bearer {token(user, session, email)}"})
    await ws.send(json.dumps({"type": "hello", "device_id": str(uuid.uuid4()), "device_name": "P", "platform": "ios"}))
    await asyncio.sleep(0.3)
    return ws


async def next_message(ws, seconds):
    """The phone's next message within `seconds`, or None."""
    try:
        return json.loads(await asyncio.wait_for(ws.recv(), seconds))
    except asyncio.TimeoutError:
        return None


def fix(ping_id):
    return json.dumps({"type": "location", "id": ping_id, "latitude": LAT, "longitude": LON, "accuracy_m": 8,
                       "timestamp_ms": int(time.time() * 1000)})


def call_in_thread(relay, agent, request_id):
    """A plain tools/call (urllib, waiting for its answer) in a thread: its result."""
    return asyncio.to_thread(post, relay, call_body(request_id), {
        "Authorization": f"Bearer {agent}", "MCP-Protocol-Version": MODERN, "Mcp-Method": "tools/call",
        "Mcp-Name": "get_phone_location"})


def test_a_hang_up_leaves_the_prompt_and_the_next_ask_joins_it(relay, make_user):
    user, session, email = make_user("Joiner", with_session=True)
    agent = token(user, session, email, client_id=str(uuid.uuid4()))

    async def scenario():
        ws = await phone(relay, user, session, email)
        async with ws:
            conn = open_call(relay, agent, call_body(7))
            ping = await next_message(ws, 5)
            assert ping["type"] == "locate"
            conn.close()  # the client's timeout: it hangs up
            assert await next_message(ws, 2) is None, "a hang-up is not a refusal: the prompt stays"
            retry = asyncio.create_task(call_in_thread(relay, agent, 8))  # the model calls again
            assert await next_message(ws, 1.5) is None, "the retry joins: no second prompt"
            await ws.send(fix(ping["id"]))
            status, body, _ = await asyncio.wait_for(retry, 15)
            return status, body

    status, body = asyncio.run(scenario())
    result = body["result"]
    assert status == 200 and result["isError"] is False, body
    assert round(result["structuredContent"]["latitude"], 3) == round(LAT, 3)


def test_a_joined_call_that_reaches_its_bound_says_it_is_the_same_request(relay, make_user):
    user, session, email = make_user("Patient", with_session=True)
    agent = token(user, session, email, client_id=str(uuid.uuid4()))

    async def scenario():
        ws = await phone(relay, user, session, email)
        async with ws:
            conn = open_call(relay, agent, call_body(1))
            ping = await next_message(ws, 5)
            conn.close()  # asked, then gone
            status, body, _ = await call_in_thread(relay, agent, 2)  # waits the bound (5 s), then "no answer yet"
            assert await next_message(ws, 0.5) is None
            return ping, body

    ping, body = asyncio.run(scenario())
    text = body["result"]["content"][0]["text"]
    assert text.startswith("This is the same request you made before (one prompt on the user's phone); no answer yet.")
    assert "request_id" in text and body["result"]["structuredContent"]["status"] == "waiting"


def cancel_during_a_call(relay, make_user, reason=None, by_another_agent=False):
    """A 2025-06-18 call waits on a phone; `notifications/cancelled` names it (with `reason`,
    from the call's own credential or another agent's): (the ping, the phone's next message
    within 1.5 s or None)."""
    user, session, email = make_user("Canceller", with_session=True)
    agent = token(user, session, email, client_id=str(uuid.uuid4()))
    canceller = token(user, session, email, client_id=str(uuid.uuid4())) if by_another_agent else agent
    params = {"requestId": 41, **({"reason": reason} if reason else {})}

    async def scenario():
        ws = await phone(relay, user, session, email)
        async with ws:
            conn = open_call(relay, agent, call_body(41, revision_meta=False), version="2025-06-18")
            ping = await next_message(ws, 5)
            status, _, _ = post(relay, {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": params},
                                {"Authorization": f"Bearer {canceller}", "MCP-Protocol-Version": "2025-06-18"})
            assert status == 202
            after = await next_message(ws, 1.5)
            conn.close()
            return ping, after

    return asyncio.run(scenario())


def test_an_explicit_cancel_still_withdraws_the_prompt(relay, make_user):
    ping, after = cancel_during_a_call(relay, make_user, reason="the user changed their mind")
    assert after == {"type": "cancel", "id": ping["id"]}


def test_a_cancel_that_says_the_client_timed_out_is_a_hang_up(relay, make_user):
    """The official SDK's courtesy cancel when its own read timeout runs out ("timed out
    after 5.0s") is the client giving up, not the person's no: the prompt stays."""
    assert cancel_during_a_call(relay, make_user, reason="timed out after 5.0s")[1] is None, "no cancel: the prompt stays"


def test_another_credentials_cancel_finds_nothing(relay, make_user):
    assert cancel_during_a_call(relay, make_user, by_another_agent=True)[1] is None, \
        "another agent cannot withdraw this agent's request"


def test_a_join_is_bound_to_the_credential(relay, make_user):
    user, session, email = make_user("Two agents", with_session=True)
    first = token(user, session, email, client_id=str(uuid.uuid4()))
    second = token(user, session, email, client_id=str(uuid.uuid4()))

    async def scenario():
        ws = await phone(relay, user, session, email)
        async with ws:
            conn = open_call(relay, first, call_body(1))
            ping = await next_message(ws, 5)
            conn.close()
            other = open_call(relay, second, call_body(1))  # another agent of the same person
            own = await next_message(ws, 5)
            other.close()
            return ping, own

    ping, own = asyncio.run(scenario())
    assert own is not None and own["type"] == "locate" and own["id"] != ping["id"], "its own request, its own prompt"


def open_http_locate(relay, agent):
    """POST /v1/locate (synchronous) on a raw socket, left waiting; the socket."""
    host, port = relay.base.removeprefix("http://").split(":")
    conn = socket.create_connection((host, int(port)))
    conn.sendall((f"POST /v1/locate?timeout_secs=30 HTTP/1.1\r\nHost: {host}\r\nAuthorization: Bearer {agent}\r\n"
                  f"Content-Length: 0\r\n\r\n").encode())
    return conn


def http_locate(relay, agent):
    import urllib.error
    import urllib.request
    request = urllib.request.Request(relay.base + "/v1/locate?timeout_secs=30", method="POST",
                                     headers={"Authorization": f"Bearer {agent}"})
    try:
        with urllib.request.urlopen(request, timeout=40) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode()


def test_over_http_a_hung_up_locate_keeps_the_prompt_and_the_next_ask_joins_it(relay, make_user):
    user, session, email = make_user("Curl", with_session=True)
    agent = token(user, session, email, client_id=str(uuid.uuid4()))

    async def scenario():
        ws = await phone(relay, user, session, email)
        async with ws:
            conn = open_http_locate(relay, agent)
            ping = await next_message(ws, 5)
            conn.close()  # curl --max-time ran out
            assert await next_message(ws, 2) is None, "the prompt stays"
            retry = asyncio.create_task(asyncio.to_thread(http_locate, relay, agent))
            assert await next_message(ws, 1.5) is None, "the retry joins: no second prompt"
            await ws.send(fix(ping["id"]))
            return await asyncio.wait_for(retry, 15)

    status, body = asyncio.run(scenario())
    assert status == 200 and round(body["latitude"], 3) == round(LAT, 3), body


def test_over_http_an_answer_nobody_was_waiting_for_reaches_the_next_ask(relay, make_user):
    """The caller hung up and the person answered before the agent asked again: the next
    ask gets that answer (within a minute), and the person is not asked twice."""
    user, session, email = make_user("Late", with_session=True)
    agent = token(user, session, email, client_id=str(uuid.uuid4()))

    async def scenario():
        ws = await phone(relay, user, session, email)
        async with ws:
            conn = open_http_locate(relay, agent)
            ping = await next_message(ws, 5)
            conn.close()
            await asyncio.sleep(0.5)
            await ws.send(fix(ping["id"]))
            await asyncio.sleep(0.5)
            retry = asyncio.create_task(asyncio.to_thread(http_locate, relay, agent))
            second = await next_message(ws, 1.5)
            return second, await asyncio.wait_for(retry, 15)

    second, (status, body) = asyncio.run(scenario())
    assert second is None or second["type"] == "cancel", second
    assert status == 200 and round(body["latitude"], 3) == round(LAT, 3), body


@pytest.fixture(scope="module")
def two_instances():
    """Two relays on one database behind no balancer, sharing a REQUEST_ID_KEY as every
    instance of a deployment does (docs/deploy.md)."""
    key = base64.b64encode(os.urandom(32)).decode()
    servers = [RelayServer(MCP_WAIT_SECONDS="5", REQUEST_ID_KEY=key) for _ in range(2)]
    yield servers
    for server in servers:
        server.stop()


def test_a_retry_that_lands_on_another_instance_joins_the_same_request(two_instances, make_user):
    """The balancer sends the model's retry to the other instance: it finds the request in
    the database, joins it (no second prompt), and gets the fix the person gives."""
    first, second = two_instances
    user, session, email = make_user("Balanced", with_session=True)
    agent = token(user, session, email, client_id=str(uuid.uuid4()))

    async def scenario():
        ws = await phone(first, user, session, email)
        async with ws:
            conn = open_call(first, agent, call_body(7))
            ping = await next_message(ws, 5)
            assert ping["type"] == "locate"
            conn.close()  # the client's timeout
            retry = asyncio.create_task(call_in_thread(second, agent, 8))
            assert await next_message(ws, 1.5) is None, "the retry on the other instance joins: no second prompt"
            await ws.send(fix(ping["id"]))
            return await asyncio.wait_for(retry, 15)

    status, body, _ = asyncio.run(scenario())
    assert status == 200 and body["result"]["isError"] is False, body
    assert round(body["result"]["structuredContent"]["latitude"], 3) == round(LAT, 3)


def test_on_another_instance_a_join_is_bound_to_the_credential(two_instances, make_user):
    """Another agent of the same person asking on the other instance opens its own request
    there: its own prompt (the person binding is pgTAP's, 63-joinable-request)."""
    first, second = two_instances
    user, session, email = make_user("Owner", with_session=True)
    agent = token(user, session, email, client_id=str(uuid.uuid4()))
    other = token(user, session, email, client_id=str(uuid.uuid4()))

    async def scenario():
        ws = await phone(first, user, session, email)
        async with ws:
            conn = open_call(first, agent, call_body(1))
            ping = await next_message(ws, 5)
            conn.close()
            elsewhere = open_call(second, other, call_body(2))
            own = await next_message(ws, 5)
            elsewhere.close()
            return ping, own

    ping, own = asyncio.run(scenario())
    assert own is not None and own["type"] == "locate" and own["id"] != ping["id"], "its own request, its own prompt"


def read_response(conn):
    """The JSON-RPC body of the HTTP response a raw `open_call` socket got (read to its end)."""
    conn.settimeout(15)
    data = b""
    while b"\r\n\r\n" not in data:
        data += conn.recv(65536)
    head, body = data.split(b"\r\n\r\n", 1)
    length = int(next(line.split(b":")[1] for line in head.split(b"\r\n") if line.lower().startswith(b"content-length")))
    while len(body) < length:
        body += conn.recv(65536)
    return json.loads(body[:length])


def test_an_answer_that_came_as_the_retrys_timeout_ran_out_reaches_the_next_retry(relay, make_user):
    """A client that timed out once may time out again just as the answer comes (the relay
    hands it over, the client has stopped listening): its next retry gets the same answer,
    not a second prompt."""
    user, session, email = make_user("Unlucky", with_session=True)
    agent = token(user, session, email, client_id=str(uuid.uuid4()))

    async def scenario():
        ws = await phone(relay, user, session, email)
        async with ws:
            first = open_call(relay, agent, call_body(1))
            ping = await next_message(ws, 5)
            first.close()  # its timeout: a hang-up
            retry = open_call(relay, agent, call_body(2))
            assert await next_message(ws, 1) is None, "the retry joins"
            await ws.send(fix(ping["id"]))
            handed = await asyncio.to_thread(read_response, retry)
            retry.close()  # ... which came as this retry's own timeout ran out: the client dropped it
            status, body, _ = await call_in_thread(relay, agent, 3)
            assert await next_message(ws, 1) is None, "no second prompt"
            return handed, status, body

    handed, status, body = asyncio.run(scenario())
    assert handed["result"]["isError"] is False, handed
    result = body["result"]
    assert status == 200 and result["isError"] is False, body
    assert result["structuredContent"] == handed["result"]["structuredContent"], "the same answer"


def test_a_timeout_cancel_after_the_answer_lets_the_next_ask_have_it_and_only_then(relay, make_user):
    """The official SDK's courtesy cancel ("timed out after …") for a call the relay had
    already answered says the answer never reached the client: the next ask gets it. Without
    such a cancel (or a hang-up before), the next ask after an answer asks the person anew."""
    user, session, email = make_user("Courteous", with_session=True)
    agent = token(user, session, email, client_id=str(uuid.uuid4()))
    headers = {"Authorization": f"Bearer {agent}", "MCP-Protocol-Version": "2025-06-18"}

    def legacy_call(request_id):
        return asyncio.to_thread(post, relay, call_body(request_id, revision_meta=False), headers)

    async def answered_call(ws, request_id):
        call = asyncio.create_task(legacy_call(request_id))
        ping = await next_message(ws, 5)
        assert ping and ping["type"] == "locate", f"call {request_id} asks the person: {ping}"
        await ws.send(fix(ping["id"]))
        status, body, _ = await asyncio.wait_for(call, 15)
        assert status == 200 and body["result"]["isError"] is False, body
        return body["result"]

    async def scenario():
        ws = await phone(relay, user, session, email)
        async with ws:
            await answered_call(ws, 1)
            answered = await answered_call(ws, 2)  # nobody hung up: a new prompt
            cancel = {"jsonrpc": "2.0", "method": "notifications/cancelled",
                      "params": {"requestId": 2, "reason": "timed out after 5.0s"}}
            status, _, _ = await asyncio.to_thread(post, relay, cancel, headers)
            assert status == 202
            status, body, _ = await legacy_call(3)
            assert await next_message(ws, 1) is None, "no second prompt"
            return answered, status, body

    answered, status, body = asyncio.run(scenario())
    assert status == 200 and body["result"]["isError"] is False, body
    assert body["result"]["structuredContent"] == answered["structuredContent"], "the answer call 2 never received"


def test_a_retry_that_comes_while_the_first_call_is_still_opening_waits_for_its_row(relay, make_user, admin):
    """Under load the first call's open can take a while: its row is not committed when the
    model's retry joins it. The retry waits for the row rather than finding nothing and
    asking the person a second time (the open is held back here by a lock on the table)."""
    user, session, email = make_user("Early", with_session=True)
    agent = token(user, session, email, client_id=str(uuid.uuid4()))

    async def scenario():
        ws = await phone(relay, user, session, email)
        async with ws:
            admin.execute("begin")
            admin.execute("lock table relay.pending_requests in exclusive mode")  # inserts wait; reads do not
            try:
                first = open_call(relay, agent, call_body(1))
                await asyncio.sleep(0.5)
                first.close()  # its timeout, while its open still waits
                retry = asyncio.create_task(call_in_thread(relay, agent, 2))
                await asyncio.sleep(1)
                assert await next_message(ws, 0.1) is None, "nothing is asked before the open commits"
            finally:
                admin.execute("commit")
            ping = await next_message(ws, 5)
            assert ping and ping["type"] == "locate", ping
            assert await next_message(ws, 1) is None, "one prompt: the retry joined the first call's request"
            await ws.send(fix(ping["id"]))
            status, body, _ = await asyncio.wait_for(retry, 15)
            return status, body

    status, body = asyncio.run(scenario())
    assert status == 200 and body["result"]["isError"] is False, body
    assert round(body["result"]["structuredContent"]["latitude"], 3) == round(LAT, 3)
