"""Quiet hours (docs/protocol.md, "Quiet hours"), with Python `websockets` phones, curl and the
official MCP SDK: the phone sets its windows over its socket (each bad one refused with a
sentence, nothing stored), gets them back after every hello; during a window an agent
without the person's "may wake me" mark gets 503 with Retry-After and the exact text over
HTTP, MCP and a durable request, and no phone is pinged; a marked agent is asked as usual."""
import asyncio
import datetime
import json
import time
import uuid

import pytest
import websockets

from relay_server import RelayServer, token
from test_durable_requests import curl, open_async
from test_relay_mcp import sdk_client


@pytest.fixture
def relay():
    server = RelayServer()
    yield server
    server.stop()


def around_now(minutes=60):
    """A window holding now in UTC, every day: it ends `minutes` from now."""
    now = datetime.datetime.now(datetime.timezone.utc)
    start, end = now - datetime.timedelta(minutes=minutes), now + datetime.timedelta(minutes=minutes)
    return {"days": [1, 2, 3, 4, 5, 6, 7], "start": start.strftime("%H:%M"), "end": end.strftime("%H:%M"),
            "time_zone": "UTC"}, end.strftime("%H:%M")


class BrowserPhone:
    """A socket that says hello as the browser phone does and collects the lists it gets."""

    def __init__(self, base, phone_token):
        self.url, self.token = base.replace("http", "ws") + "/v1/device", phone_token

    async def __aenter__(self):
        self.ws = await websockets.connect(self.url, additional_headers={"Authorization": f"Bearer {self.token}"})
        await self.ws.send(json.dumps({"type": "hello", "device_id": str(uuid.uuid4()), "platform": "web",
                                       "app_version": "1"}))
        # What every hello brings, before any reply to what the test sends.
        self.lists = {}
        while len(self.lists) < 3:
            message = await self.next("always_allowed", "quiet_hours", "may_wake")
            self.lists[message["type"]] = message
        return self

    async def __aexit__(self, *_):
        await self.ws.close()

    async def next(self, *types):
        while True:
            message = json.loads(await asyncio.wait_for(self.ws.recv(), 10))
            if message["type"] in types:
                return message

    async def send(self, message, *types):
        await self.ws.send(json.dumps(message))
        return await self.next(*types)


def test_windows_are_set_over_the_socket_and_each_bad_one_is_refused_with_a_sentence(relay, make_user):
    who = make_user("Quinn", with_session=True)
    night = {"days": [7, 1, 2, 3, 4], "start": "22:30", "end": "06:45", "time_zone": "Europe/Berlin"}

    async def scenario():
        async with BrowserPhone(relay.base, token(*who)) as phone:
            first = phone.lists["quiet_hours"], phone.lists["may_wake"]
            refusals = [(await phone.send({"type": "quiet_hours", "windows": windows}, "error", "quiet_hours"))
                        for windows in (
                            [{**night, "time_zone": "Mars/Olympus"}],
                            [night, {**night, "end": "22:30"}],
                            [{**night, "days": [0]}],
                            [{**night, "start": "25:00"}],
                            [night] * 9)]
            stored = await phone.send({"type": "quiet_hours", "windows": [night]}, "error", "quiet_hours")
        async with BrowserPhone(relay.base, token(*who)) as phone:
            again = phone.lists["quiet_hours"]
        return first, refusals, stored, again

    (windows, wakers), refusals, stored, again = asyncio.run(scenario())
    assert windows == {"type": "quiet_hours", "windows": []} and wakers == {"type": "may_wake", "agents": []}
    assert [r.get("message") for r in refusals] == [
        "window 1: unknown time zone (use an IANA name such as Europe/Berlin)",
        "window 2: the end must differ from the start",
        "window 1: days must be 1 to 7 ISO weekdays (1 = Monday)",
        "window 1: start and end must be times as HH:MM",
        "quiet hours are a list of at most 8 windows"]
    assert all(r["type"] == "error" for r in refusals)
    expected = {**night, "days": [1, 2, 3, 4, 7]}
    assert stored == {"type": "quiet_hours", "windows": [expected]}
    assert again == stored, "after the next hello the phone gets its windows back"


def test_in_quiet_hours_an_agent_gets_503_until_the_window_ends_and_no_phone_is_asked(relay, make_user, admin):
    who = make_user("Quinn", with_session=True)
    window, end = around_now()
    agent = token(*who, client_id=str(uuid.uuid4()))
    text = f"Quinn is in quiet hours until {end} (their time). Ask again then."

    async def scenario():
        async with BrowserPhone(relay.base, token(*who)) as phone:
            await phone.send({"type": "quiet_hours", "windows": [window]}, "quiet_hours")
            status, headers, body = await asyncio.to_thread(curl, "POST", f"{relay.base}/v1/locate?timeout_secs=10", agent)
            durable = await asyncio.to_thread(open_async, relay.base, agent)
            async with sdk_client(relay.base, agent, "auto") as client:
                result = await client.call_tool("get_phone_location", {"timeout_secs": 10})
            pinged = []
            try:
                while True:
                    message = json.loads(await asyncio.wait_for(phone.ws.recv(), 1))
                    pinged += [message] if message["type"] == "locate" else []
            except asyncio.TimeoutError:
                pass
            return (status, headers, body), durable, result, pinged

    (status, headers, body), durable, result, pinged = asyncio.run(scenario())
    assert (status, body) == (503, text)
    assert 3000 <= int(headers["retry-after"]) <= 3601, "seconds until the window ends"
    assert (durable[0], durable[2]) == (503, text), "a durable request is answered the same at once"
    assert result.is_error and result.content[0].text == text
    assert pinged == [], "no phone is asked in quiet hours"
    rows = admin.execute("select count(*) from relay.pending_requests where owner_id = %s", (who[0],)).fetchone()[0]
    assert rows == 0, "nothing was stored for those requests"


def test_an_agent_the_person_lets_wake_them_is_asked_as_usual(relay, make_user):
    who = make_user("Quinn", with_session=True)
    window, end = around_now()
    marked, other = str(uuid.uuid4()), str(uuid.uuid4())

    async def scenario():
        async with BrowserPhone(relay.base, token(*who)) as phone:
            await phone.send({"type": "quiet_hours", "windows": [window]}, "quiet_hours")
            listed = await phone.send({"type": "may_wake", "client_id": marked, "requester_id": None, "value": True},
                                      "may_wake")
            call = asyncio.create_task(asyncio.to_thread(
                curl, "POST", f"{relay.base}/v1/locate?timeout_secs=10", token(*who, client_id=marked)))
            ping = await phone.next("locate")
            await phone.ws.send(json.dumps({"type": "location", "id": ping["id"], "latitude": 47.3769,
                                            "longitude": 8.5417, "accuracy_m": 12,
                                            "timestamp_ms": int(time.time() * 1000)}))
            answered = await call
            refused = await asyncio.to_thread(curl, "POST", f"{relay.base}/v1/locate?timeout_secs=10",
                                              token(*who, client_id=other))
            cleared = await phone.send({"type": "may_wake", "client_id": marked, "value": False}, "may_wake")
            again = await asyncio.to_thread(curl, "POST", f"{relay.base}/v1/locate?timeout_secs=10",
                                            token(*who, client_id=marked))
            return listed, answered, refused, cleared, again

    listed, answered, refused, cleared, again = asyncio.run(scenario())
    assert [a["client_id"] for a in listed["agents"]] == [marked]
    assert answered[0] == 200 and json.loads(answered[2])["latitude"] == 47.3769
    assert refused[0] == 503 and "quiet hours" in refused[2], "another agent still waits for the morning"
    assert cleared == {"type": "may_wake", "agents": []}
    assert again[0] == 503, "once the mark is cleared, the agent waits too"
