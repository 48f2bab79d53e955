"""Consent that informs (docs/protocol.md, "Consent"), with Python `websockets` phones and the
official MCP SDK: an approximate answer reaches the agent with `precision` (and the relay
refuses a claim sharper than 3 km), every answer says how precise it is, and an always-allow can
be approximate and for a while, absent from the phone's list once it ended."""
import asyncio
import json
import time
import uuid

import pytest
import websockets

from relay_server import RelayServer, token
from test_reasons import locate
from test_relay_mcp import sdk_client

NO_FIX = "The phone could not get a location fix. Try again in a moment."


@pytest.fixture
def relay():
    server = RelayServer()
    yield server
    server.stop()


def fix(request_id, **fields):
    return {"type": "location", "id": request_id, "latitude": 52.5125, "longitude": 13.4125, "accuracy_m": 3000,
            "timestamp_ms": int(time.time() * 1000), **fields}


async def answering_phone(base, phone, answers):
    """Answers the n-th ping with answers[n](ping id)."""
    async with websockets.connect(base.replace("http", "ws") + "/v1/device",
                                  additional_headers={"Authorization": f"Bearer {phone}"}) as ws:
        await ws.send(json.dumps({"type": "hello", "device_id": str(uuid.uuid4()), "device_name": "Pixel",
                                  "platform": "android", "app_version": "1"}))
        for answer in answers:
            while True:
                message = json.loads(await asyncio.wait_for(ws.recv(), 20))
                if message["type"] == "locate":
                    await ws.send(json.dumps(answer(message["id"])))
                    break


def test_an_approximate_answer_reaches_the_agent_with_its_precision(relay, make_user):
    who = make_user("Ada", with_session=True)
    agent = token(*who, client_id=str(uuid.uuid4()))
    answers = [lambda i: fix(i, precision="approximate"),
               lambda i: fix(i, precision="approximate", accuracy_m=2999),
               lambda i: fix(i, accuracy_m=9, latitude=52.52)]

    async def scenario():
        phone = asyncio.create_task(answering_phone(relay.base, token(*who), answers))
        await asyncio.sleep(0.5)
        results = [await asyncio.to_thread(locate, relay.base, agent) for _ in answers]
        await asyncio.wait_for(phone, 20)
        return results

    (status1, body1), (status2, body2), (status3, body3) = asyncio.run(scenario())
    assert status1 == 200
    shared = json.loads(body1)
    assert (shared["latitude"], shared["longitude"], shared["accuracy_m"]) == (52.5125, 13.4125, 3000)
    assert shared["precision"] == "approximate"
    assert (status2, body2) == (424, NO_FIX), "an approximate claim sharper than 3 km is a bad answer"
    assert status3 == 200 and json.loads(body3)["precision"] == "precise", "an answer without precision is precise"


def test_the_relay_makes_an_approximate_answer_approximate(relay, make_user):
    """Hostile input round 3: a phone that claims "approximate" but
    sends its sharp fix with altitude, speed and heading is snapped by the relay itself to
    the centre of its 0.025° cell, and nothing finer reaches the agent."""
    who = make_user("Di", with_session=True)
    agent = token(*who, client_id=str(uuid.uuid4()))
    sharp = lambda i: fix(i, precision="approximate", latitude=52.520008, longitude=13.404954, accuracy_m=3000,
                          altitude_m=34.5, speed_mps=1.2, heading_deg=270)

    async def scenario():
        phone = asyncio.create_task(answering_phone(relay.base, token(*who), [sharp]))
        await asyncio.sleep(0.5)
        result = await asyncio.to_thread(locate, relay.base, agent)
        await asyncio.wait_for(phone, 20)
        return result

    status, body = asyncio.run(scenario())
    assert status == 200, body
    answer = json.loads(body)
    assert (answer["latitude"], answer["longitude"], answer["precision"]) == (52.5125, 13.4125, "approximate")
    assert not {"altitude_m", "speed_mps", "heading_deg"} & answer.keys(), answer


def test_the_mcp_result_says_how_precise_it_is(relay, make_user):
    who = make_user("Bo", with_session=True)
    agent = token(*who, client_id=str(uuid.uuid4()))

    async def scenario():
        phone = asyncio.create_task(answering_phone(relay.base, token(*who), [lambda i: fix(i, precision="approximate")]))
        await asyncio.sleep(0.5)
        async with sdk_client(relay.base, agent, "auto") as client:
            tools = {tool.name: tool for tool in (await client.list_tools()).tools}
            assert "precision" in tools["get_phone_location"].output_schema["anyOf"][0]["required"]
            result = await client.call_tool("get_phone_location", {"timeout_secs": 10})  # validated against outputSchema
        await asyncio.wait_for(phone, 20)
        return result

    result = asyncio.run(scenario())
    assert not result.is_error
    assert result.structured_content["precision"] == "approximate"
    assert result.structured_content["accuracy_m"] == 3000


def test_an_always_allow_can_be_approximate_and_for_a_while(relay, make_user, admin):
    who = make_user("Cy", with_session=True)

    async def scenario():
        async with websockets.connect(relay.base.replace("http", "ws") + "/v1/device",
                                      additional_headers={"Authorization": f"Bearer {token(*who)}"}) as ws:
            async def send(message):
                await ws.send(json.dumps(message))
                while True:
                    reply = json.loads(await asyncio.wait_for(ws.recv(), 5))
                    if reply["type"] == "always_allowed":
                        return reply

            hello = await send({"type": "hello", "device_id": str(uuid.uuid4()), "platform": "web"})
            assert hello["agents"] == []
            hour = await send({"type": "always_allow", "client_id": "agent-hour", "client_name": "Hourly",
                               "precision": "approximate", "expires_in_s": 2})
            ever = await send({"type": "always_allow", "client_id": "agent-ever", "client_name": "Ever"})
            # Malformed always_allow messages are dropped, as every malformed phone message is.
            for bad in ({"precision": "blurry"}, {"expires_in_s": 0}, {"expires_in_s": 86401},
                        {"expires_in_s": 1e300}, {"expires_in_s": 1.5}, {"expires_in_s": "3600"}):
                await ws.send(json.dumps({"type": "always_allow", "client_id": "agent-x", **bad}))
            after = await send({"type": "always_allow", "client_id": "agent-ok"})
            return hour, ever, after

    hour, ever, after = asyncio.run(scenario())
    entry = hour["agents"][0]
    assert (entry["client_id"], entry["precision"]) == ("agent-hour", "approximate")
    assert 0 < entry["expires_ms"] - time.time() * 1000 <= 2000
    assert {a["client_id"]: (a["precision"], a["expires_ms"]) for a in ever["agents"]}["agent-ever"] == ("precise", None)
    assert sorted(a["client_id"] for a in after["agents"]) == ["agent-ever", "agent-hour", "agent-ok"], "none of the bad ones"
    time.sleep(2.2)

    async def again():
        async with websockets.connect(relay.base.replace("http", "ws") + "/v1/device",
                                      additional_headers={"Authorization": f"Bearer {token(*who)}"}) as ws:
            await ws.send(json.dumps({"type": "hello", "device_id": str(uuid.uuid4()), "platform": "web"}))
            while True:
                reply = json.loads(await asyncio.wait_for(ws.recv(), 5))
                if reply["type"] == "always_allowed":
                    return reply

    assert [a["client_id"] for a in asyncio.run(again())["agents"]] == ["agent-ever", "agent-ok"], "an ended one is absent"
