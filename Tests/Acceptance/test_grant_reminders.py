"""Reminders of standing grants (SPEC §14, issue 42 part 4), with two Python `websockets`
phones of one account on two relay instances and curl as the agent: a for-good Always allow
used after GRANT_REMINDER_SECONDS is followed, once, by a reminder on every phone of the
account (whichever instance holds it); the list shows the last use; Keep starts the interval
again; Remove ends the grant, so the agent is asked again; a grant for a while is never
reminded of; a reminder carries no location."""
import asyncio
import json
import time
import uuid

import pytest
import websockets

from relay_server import RelayServer, token
from test_durable_requests import curl

INTERVAL = 2  # GRANT_REMINDER_SECONDS


@pytest.fixture
def relays():
    servers = [RelayServer(GRANT_REMINDER_SECONDS=str(INTERVAL)), RelayServer(GRANT_REMINDER_SECONDS=str(INTERVAL))]
    yield servers
    for server in servers:
        server.stop()


class AutoPhone:
    """A phone that answers every ping carrying `always_allow` with a fix (as the app does)
    and keeps every other message, in order."""

    def __init__(self, base, credential):
        self.base, self.credential, self.messages = base, credential, []

    async def __aenter__(self):
        self.ws = await websockets.connect(self.base.replace("http", "ws") + "/v1/device",
                                           additional_headers={"Authorization": f"Bearer {self.credential}"})
        await self.ws.send(json.dumps({"type": "hello", "device_id": str(uuid.uuid4()), "platform": "web", "app_version": "1"}))
        self.reader = asyncio.create_task(self.read())
        await self.next_of("always_allowed")
        return self

    async def __aexit__(self, *exc):
        self.reader.cancel()
        await self.ws.close()

    async def read(self):
        async for text in self.ws:
            message = json.loads(text)
            self.messages.append(message)
            if message["type"] == "locate" and message.get("always_allow"):
                await self.ws.send(json.dumps({"type": "location", "id": message["id"], "latitude": 52.52,
                                               "longitude": 13.405, "accuracy_m": 9, "timestamp_ms": int(time.time() * 1000)}))

    async def next_of(self, kind, after=0):
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            found = [m for m in self.messages[after:] if m["type"] == kind]
            if found:
                return found[0]
            await asyncio.sleep(0.02)
        raise AssertionError(f"no {kind} message within 10 s")

    def kinds(self, kind):
        return [m for m in self.messages if m["type"] == kind]


def test_a_standing_grant_reminds_once_per_interval_on_every_phone_and_keep_or_remove_answer_it(relays, make_user, admin):
    a, b = relays
    ada = make_user("Ada", with_session=True)
    helper, hourly = str(uuid.uuid4()), str(uuid.uuid4())

    async def locate(client_id):
        return await asyncio.to_thread(curl, "POST", f"{b.base}/v1/locate?timeout_secs=10", token(*ada, client_id=client_id))

    async def scenario():
        async with AutoPhone(a.base, token(*ada)) as one, AutoPhone(b.base, token(*ada)) as two:
            await one.ws.send(json.dumps({"type": "always_allow", "client_id": helper, "client_name": "Helper"}))
            await one.next_of("always_allowed", len(one.messages))
            await one.ws.send(json.dumps({"type": "always_allow", "client_id": hourly, "client_name": "Hourly",
                                          "expires_in_s": 3600}))
            await one.next_of("always_allowed", len(one.messages))
            first = await locate(helper)  # right away: not due
            await asyncio.sleep(INTERVAL + 0.3)
            hour = await locate(hourly)  # due, but a grant for a while is never reminded of
            due = await locate(helper)
            reminders = [await one.next_of("reminder"), await two.next_of("reminder")]
            again = await locate(helper)  # within the interval of the reminder: none
            mark = len(one.messages)
            await one.ws.send(json.dumps({"type": "always_allow_keep", "client_id": helper, "requester_id": None}))
            kept = await one.next_of("always_allowed", mark)
            await asyncio.sleep(INTERVAL + 0.3)
            after_keep = await locate(helper)  # an interval after Keep: reminded again
            await one.next_of("reminder", mark)
            mark = len(one.messages)
            await one.ws.send(json.dumps({"type": "always_allow_remove", "client_id": helper, "requester_id": None}))
            await one.next_of("always_allowed", mark)
            asked = asyncio.create_task(asyncio.to_thread(
                curl, "POST", f"{b.base}/v1/locate?timeout_secs=2", token(*ada, client_id=helper)))
            ping = await one.next_of("locate", mark)
            await asked
            await asyncio.sleep(0.5)  # a late duplicate would arrive by now
            return first, hour, due, reminders, again, kept, after_keep, ping, one.kinds("reminder"), two.kinds("reminder")

    first, hour, due, reminders, again, kept, after_keep, ping, all_one, all_two = asyncio.run(scenario())
    assert [call[0] for call in (first, hour, due, again, after_keep)] == [200] * 5, "every automatic answer reached the agent"
    assert reminders[0] == reminders[1] == {
        "type": "reminder", "client_id": helper, "agent_name": "Helper", "requester_id": None,
        "text": "Helper can still check your location without asking."}, "both phones, on both instances; no location in it"
    assert len(all_one) == len(all_two) == 2, "once at the first due use and once an interval after Keep; never for Hourly"
    listed = {agent["client_id"]: agent for agent in kept["agents"]}
    assert listed[helper]["last_used_ms"] and abs(listed[helper]["last_used_ms"] / 1000 - time.time()) < 60, "the last use"
    assert listed[hourly]["last_used_ms"], "a grant for a while shows its last use too"
    assert ping["always_allow"] is None, "after Remove the agent is asked again"
    assert admin.execute("select count(*) from public.always_allowed_agents where user_id = %s and client_id = %s",
                         (ada[0], helper)).fetchone() == (0,)


def test_keep_refuses_a_grant_that_is_not_for_good_and_leaves_the_list(relays, make_user):
    a, _ = relays
    ada = make_user("Ada", with_session=True)

    async def scenario():
        async with AutoPhone(a.base, token(*ada)) as phone:
            await phone.ws.send(json.dumps({"type": "always_allow", "client_id": "for-an-hour", "expires_in_s": 3600}))
            await phone.next_of("always_allowed", len(phone.messages))
            mark = len(phone.messages)
            await phone.ws.send(json.dumps({"type": "always_allow_keep", "client_id": "for-an-hour", "requester_id": None}))
            return await phone.next_of("always_allowed", mark)

    refused = asyncio.run(scenario())
    assert refused["error"] == "refused" and [agent["client_id"] for agent in refused["agents"]] == ["for-an-hour"]
