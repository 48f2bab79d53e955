"""Places (docs/protocol.md, "Places"), with Python `websockets` phones, curl and the official
MCP SDK: a phone inside a place it shares by name answers with the name only; the agent
gets 200 with `place` and `precision: "place"` and no position (the SDK validates it against
the tool's outputSchema); a place answer with coordinates or a name that is empty or too
long after cleaning is the no-fix answer; and the name crosses instances only sealed: no
notification, table, log line or metric holds it."""
import asyncio
import json
import subprocess
import time
import uuid

import pytest
import websockets

from conftest import ADMIN_URL
from relay_server import RelayServer, token
from test_durable_requests import curl
from test_relay_mcp import sdk_client
from test_relay_two_instances import EveryNotification

NO_FIX = "The phone could not get a location fix. Try again in a moment."
PLACE = "Grandma's Garden Flat"


@pytest.fixture
def relay():
    server = RelayServer()
    yield server
    server.stop()


async def place_phone(base, phone, answers):
    """A phone that answers the n-th ping with {type: location, id, precision: place, **answers[n]}."""
    async with websockets.connect(base.replace("http", "ws") + "/v1/device",
                                  additional_headers={"Authorization": f"Bearer {phone}"}) as ws:
        await ws.send(json.dumps({"type": "hello", "device_id": str(uuid.uuid4()), "device_name": "Pixel",
                                  "platform": "android", "app_version": "1"}))
        for fields in answers:
            while True:
                message = json.loads(await asyncio.wait_for(ws.recv(), 20))
                if message["type"] == "locate":
                    await ws.send(json.dumps({"type": "location", "id": message["id"], "precision": "place",
                                              "timestamp_ms": int(time.time() * 1000), **fields}))
                    break


def locate_all(base, agent, phone_token, answers):
    """Each answer in turn: the agent's (status, body) for a locate the phone answers so."""
    async def scenario():
        phone = asyncio.create_task(place_phone(base, phone_token, answers))
        await asyncio.sleep(0.5)
        results = []
        for _ in answers:
            status, _, body = await asyncio.to_thread(curl, "POST", f"{base}/v1/locate?timeout_secs=10", agent)
            results.append((status, body))
        await asyncio.wait_for(phone, 20)
        return results

    return asyncio.run(scenario())


def test_a_place_answer_reaches_the_agent_as_the_name_only(relay, make_user):
    who = make_user("Pia", with_session=True)
    agent = token(*who, client_id=str(uuid.uuid4()))
    [(status, body)] = locate_all(relay.base, agent, token(*who), [{"place": PLACE}])
    assert status == 200, body
    answer = json.loads(body)
    assert answer["place"] == PLACE and answer["precision"] == "place"
    assert not {"latitude", "longitude", "accuracy_m"} & answer.keys()
    assert answer["device"] == {"name": "Pixel", "platform": "android"}


def test_the_mcp_result_is_a_place_valid_against_the_output_schema(relay, make_user):
    who = make_user("Pia", with_session=True)
    agent = token(*who, client_id=str(uuid.uuid4()))

    async def scenario():
        phone = asyncio.create_task(place_phone(relay.base, token(*who), [{"place": "Home"}]))
        await asyncio.sleep(0.5)
        async with sdk_client(relay.base, agent, "auto") as client:
            result = await client.call_tool("get_phone_location", {"timeout_secs": 10})  # validated against outputSchema
        await asyncio.wait_for(phone, 20)
        return result

    result = asyncio.run(scenario())
    assert not result.is_error
    assert result.structured_content["place"] == "Home" and result.structured_content["precision"] == "place"
    assert "latitude" not in result.structured_content


def test_a_place_answer_with_a_position_or_a_bad_name_is_no_fix(relay, make_user):
    who = make_user("Pia", with_session=True)
    agent = token(*who, client_id=str(uuid.uuid4()))
    bad = [{"place": "Home", "latitude": 52.5, "longitude": 13.4, "accuracy_m": 10},
           {"place": "Home", "accuracy_m": 10},
           {"place": "\u202e\u200b \u2066"},
           {"place": "x" * 41},
           {}]
    assert locate_all(relay.base, agent, token(*who), bad) == [(424, NO_FIX)] * len(bad)
    [(status, body)] = locate_all(relay.base, agent, token(*who), [{"place": "\u202eHome\u202c"}])
    assert status == 200 and json.loads(body)["place"] == "Home", "bidi controls are removed from the name"


def test_the_place_name_is_in_no_notification_table_log_or_metric(make_user):
    servers = [RelayServer(LOG_LEVEL="debug"), RelayServer(LOG_LEVEL="debug")]
    waiter, holder = servers
    who = make_user("Pia", with_session=True)
    agent = token(*who, client_id=str(uuid.uuid4()))
    try:
        with EveryNotification(servers) as notes:
            async def scenario():
                phone = asyncio.create_task(place_phone(holder.base, token(*who), [{"place": PLACE}]))
                await asyncio.sleep(0.5)
                result = await asyncio.to_thread(curl, "POST", f"{waiter.base}/v1/locate?timeout_secs=10", agent)
                await asyncio.wait_for(phone, 20)
                return result

            status, _, body = asyncio.run(scenario())
            assert status == 200 and json.loads(body)["place"] == PLACE, "answered on the other instance, opened here"
            dump = subprocess.run(["pg_dump", "--data-only", ADMIN_URL], capture_output=True, text=True).stdout
            metrics = [curl("GET", f"{s.base}/metrics", agent)[2] for s in servers]
    finally:
        for server in servers:
            server.stop()
    assert any('"sealed": "' in note for note in notes), "the answer crossed sealed"
    for text in [*notes, dump, *metrics, *(s.logs for s in servers)]:
        assert PLACE not in text and "Grandma" not in text
