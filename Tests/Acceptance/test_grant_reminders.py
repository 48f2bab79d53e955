"""Reminders of standing grants (docs/protocol.md, "Reminders"), with two Python `websockets`
phones of one account on two relay instances and curl as the agent: a for-good Always allow
used after GRANT_REMINDER_SECONDS is followed, once, by a reminder on every phone of the
account (whichever instance holds it); the list shows the last use; Keep starts the interval
again; Remove ends the grant, so the agent is asked again; a grant for a while is never
reminded of; a reminder carries no location."""
import asyncio
import json
import re
import subprocess
import time
import uuid

import pytest
import websockets

from conftest import make_oauth_client
from push_kit import Push, hex_token, wait_for
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


def test_the_settling_instance_pushes_a_reminder_once_and_the_notification_answers_it(make_user, admin):
    """Phones that hold no socket are reminded too: the instance that settled the due
    automatic answer — and only it, though both instances hold a phone of the account —
    claims the reminder's push once and sends it to the account's APNs token (fake APNs: an
    alert in category GRANT_REMINDER, collapse id `reminder-…`) and Web Push subscription
    (fake service, decrypted with http_ece), carrying the sentence and the agent, no
    location. Keep and Remove answer it without a socket (POST /v1/device/answer, as the
    notification's actions do): 204, and 410 for a Keep with nothing for good to keep."""
    push = Push()
    servers = [RelayServer(**push.env, GRANT_REMINDER_SECONDS=str(INTERVAL)) for _ in range(2)]
    a, b = servers
    try:
        ada = make_user("Ada", with_session=True)
        user = ada[0]
        helper = str(uuid.uuid4())
        make_oauth_client(admin, helper, "Helper")
        admin.execute("insert into public.always_allowed_agents (user_id, client_id, client_name, created_at)"
                      " values (%s, %s, 'Helper', now() - interval '1 hour')", (user, helper))
        device = uuid.uuid4()
        admin.execute("insert into public.devices (id, user_id, name, platform) values (%s, %s, 'iPad', 'ios')", (device, user))
        apns_token = hex_token()
        admin.execute("insert into public.push_tokens (token, user_id, device_id, environment) values (%s, %s, %s, 'production')",
                      (apns_token, user, device))
        path = "/sub/reminder-" + uuid.uuid4().hex[:6]
        endpoint, p256dh, auth = push.web.subscribe(path)
        admin.execute("insert into public.web_push_subscriptions (endpoint, p256dh, auth, user_id, device_id)"
                      " values (%s, %s, %s, %s, %s)", (endpoint, p256dh, auth, user, device))

        def reminders():
            return ([p for p in push.apns_for([apns_token]) if p["payload"].get("kind") == "reminder"],
                    [p for p in push.web_for([path]) if p["payload"].get("kind") == "reminder"])

        async def scenario():
            async with AutoPhone(a.base, token(*ada)), AutoPhone(b.base, token(*ada)):
                due = await asyncio.to_thread(curl, "POST", f"{b.base}/v1/locate?timeout_secs=10", token(*ada, client_id=helper))
                await asyncio.to_thread(wait_for, lambda: all(reminders()), 30)
                again = await asyncio.to_thread(curl, "POST", f"{a.base}/v1/locate?timeout_secs=10", token(*ada, client_id=helper))
                await asyncio.sleep(1)  # a second push would arrive by now
                return due, again

        due, again = asyncio.run(scenario())
        assert due[0] == again[0] == 200
        apns, web = reminders()
        assert len(apns) == len(web) == 1, "one push per target, from one instance, for one reminder"
        headers = apns[0]["headers"]
        assert headers["apns-push-type"] == "alert" and headers["apns-priority"] == "10"
        assert re.fullmatch(r"reminder-[0-9a-f]{32}", headers["apns-collapse-id"])
        text = "Helper can still check your location without asking."
        assert apns[0]["payload"] == {
            "aps": {"alert": {"title": "Whereabot", "body": text}, "sound": "default", "category": "GRANT_REMINDER",
                    "thread-id": helper},
            "kind": "reminder", "client_id": helper, "agent_name": "Helper", "requester_id": None}
        assert web[0]["status"] == 201 and web[0]["headers"]["topic"] == headers["apns-collapse-id"][len("reminder-"):]
        assert web[0]["payload"] == {"v": 1, "kind": "reminder", "title": "Whereabot", "body": text, "client_id": helper,
                                     "agent_name": "Helper", "requester_id": None, "url": "/app/"}
        claimed = sum(metric(server, 'whereabot_push_claims_total{stage="reminder",status="claimed"}') for server in servers)
        assert claimed == 1, "the other instance never claimed it"

        phone = token(*ada)
        answer = f"{a.base}/v1/device/answer"

        def post(body):
            return curl("POST", answer, phone, "-H", "Content-Type: application/json", "-d", json.dumps(body))

        assert post({"type": "always_allow_keep", "client_id": helper, "requester_id": None})[0] == 204
        assert admin.execute("select reminded_at > now() - interval '10 seconds' from public.always_allowed_agents"
                             " where user_id = %s", (user,)).fetchone() == (True,), "Keep starts the interval again"
        status, _, body = post({"type": "always_allow_keep", "client_id": "nobody-allows-this"})
        assert (status, body) == (410, "No always-allow of this agent for good is left to keep.")
        assert post({"type": "always_allow_remove", "client_id": helper, "requester_id": None})[0] == 204
        assert admin.execute("select count(*) from public.always_allowed_agents where user_id = %s", (user,)).fetchone() == (0,)
        assert post({"type": "always_allow_remove", "client_id": helper})[0] == 204, "Remove of a grant already gone is taken"
        status, _, body = curl("POST", answer, token(*ada, client_id=helper), "-H", "Content-Type: application/json", "-d",
                               json.dumps({"type": "always_allow_keep", "client_id": helper}))
        assert status == 403, "an agent cannot keep its own grant"
        status, _, body = post({"type": "always_allow", "client_id": helper})
        assert (status, body) == (400, "Only answers (location, denied, unavailable) and a reminder's Keep or Remove can be posted here.")
    finally:
        for server in servers:
            server.stop()
        push.stop()


def metric(server, name):
    text = subprocess.run(["curl", "-s", f"{server.base}/metrics"], capture_output=True, text=True, timeout=30).stdout
    return sum(int(line.rsplit(" ", 1)[1]) for line in text.splitlines() if line.startswith(name))
