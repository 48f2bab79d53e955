"""Stop all sharing (docs/protocol.md, "Stop all sharing"), with Python `websockets` phones and
curl against two relay instances: one message on the phone socket ends the account's agent key,
always-allow, share and waiting request, answered with the counts; the waiting agent gets 403
with the denied text, the key fails on both instances within 5 s, the person shared with finds
nobody, and the always-allowed agent is asked again."""
import asyncio
import json
import time
import uuid

import pytest
import websockets

from relay_server import RelayServer, token
from test_durable_requests import curl

DECLINED = "The user declined to share their location."


@pytest.fixture
def relays():
    servers = [RelayServer(), RelayServer()]
    yield servers
    for server in servers:
        server.stop()


def test_one_message_ends_every_standing_permission_on_every_instance(relays, make_user, admin):
    a, b = relays
    ada, bob = make_user("Ada", with_session=True), make_user("Bob", with_session=True)
    admin.execute("insert into public.location_shares (owner_id, viewer_id) values (%s, %s)", (ada[0], bob[0]))
    allowed, waiting = str(uuid.uuid4()), str(uuid.uuid4())

    async def scenario():
        async with websockets.connect(a.base.replace("http", "ws") + "/v1/device",
                                      additional_headers={"Authorization": f"Bearer {token(*ada)}"}) as ws:
            async def next_of(*types):
                while True:
                    message = json.loads(await asyncio.wait_for(ws.recv(), 10))
                    if message["type"] in types:
                        return message

            await ws.send(json.dumps({"type": "hello", "device_id": str(uuid.uuid4()), "platform": "web", "app_version": "1"}))
            await next_of("always_allowed")
            await ws.send(json.dumps({"type": "agent_key_create", "name": "nightly"}))
            key = (await next_of("agent_keys"))["created"]
            await ws.send(json.dumps({"type": "always_allow", "client_id": allowed, "client_name": "Helper"}))
            await next_of("always_allowed")
            call = asyncio.create_task(asyncio.to_thread(
                curl, "POST", f"{b.base}/v1/locate?timeout_secs=30", token(*ada, client_id=waiting)))
            await next_of("locate")  # asked, and left waiting
            await ws.send(json.dumps({"type": "stop_all_sharing"}))
            counts = await next_of("stopped_all_sharing")
            declined = await call
            await ws.send(json.dumps({"type": "always_allow", "client_id": "x"}))  # any account message: the list now
            lists = await next_of("always_allowed")
            return key, counts, declined, lists

    key, counts, declined, lists = asyncio.run(scenario())
    assert counts == {"type": "stopped_all_sharing", "always_allowed": 1, "shares": 1, "agent_keys": 1, "agents": 0,
                      "requests": 1}
    assert (declined[0], declined[2]) == (403, DECLINED), "the waiting agent is told the person declined"
    assert [agent["client_id"] for agent in lists["agents"]] == ["x"], "only what was allowed after it"

    deadline = time.time() + 5
    statuses = None
    while time.time() < deadline:
        statuses = [curl("POST", f"{server.base}/v1/locate?timeout_secs=1", key)[0] for server in relays]
        if statuses == [401, 401]:
            break
        time.sleep(0.2)
    assert statuses == [401, 401], "the key fails on every instance within 5 s"
    status, _, body = curl("POST", f"{a.base}/v1/locate?timeout_secs=1&person=Ada", token(*bob, client_id=str(uuid.uuid4())))
    assert status == 404 and body.startswith("Nobody named Ada shares their location with you."), "the share ended"
    assert admin.execute("select count(*) from public.always_allowed_agents where user_id = %s and client_id = %s",
                         (ada[0], allowed)).fetchone() == (0,)
