"""Two `whereabot serve` processes on one database: a phone on instance A answers an agent on
instance B, for every outcome; and a privacy check over everything that crossed Postgres."""
import asyncio
import json
import subprocess
import threading
import time
import uuid

import psycopg
import pytest
import websockets

from conftest import ADMIN_URL
from relay_server import RelayServer, instance_channel, token

BROADCAST = ["whereabot_device", "whereabot_key", "whereabot_replay"]


class EveryNotification:
    """Collects the payload of every notification on the instances' own channels and the
    broadcast ones while the `with` block runs (privacy tests read them all)."""

    def __init__(self, servers):
        self.channels = [instance_channel(s.instance) for s in servers] + BROADCAST
        self.payloads, self.stop = [], threading.Event()
        self.thread = threading.Thread(target=self.listen)

    def listen(self):
        with psycopg.connect(ADMIN_URL, autocommit=True) as conn:
            for channel in self.channels:
                conn.execute(f'listen "{channel}"')
            while not self.stop.is_set():
                self.payloads.extend(n.payload for n in conn.notifies(timeout=0.2))

    def start(self):
        self.thread.start()
        return self.payloads

    def close(self):
        self.stop.set()
        self.thread.join()

    def __enter__(self):
        return self.start()

    def __exit__(self, *_):
        self.close()
# Distinctive coordinates, so that any plaintext copy is found by a plain text search.
LATITUDE, LONGITUDE = "47.3768866", "8.5416940"

ROWS = [
    ({"type": "location", "latitude": float(LATITUDE), "longitude": float(LONGITUDE), "accuracy_m": 7}, 200, None),
    ({"type": "denied", "reason": "user"}, 403, "The user declined to share their location."),
    ({"type": "denied", "reason": "no_answer"}, 408, "The user did not respond on their phone. Ask them before trying again."),
    ({"type": "unavailable", "reason": "permission"}, 424,
     "Location access is off for Whereabot on the user's phone. Ask them to allow it in Settings."),
    ({"type": "unavailable", "reason": "no_fix"}, 424, "The phone could not get a location fix. Try again in a moment."),
    (None, 504, "The phone did not answer in time. Ask the user to open Whereabot and retry."),
]


@pytest.fixture
def instances():
    a, b = RelayServer(), RelayServer()
    yield a, b
    for server in (a, b):
        if server.process.poll() is None:
            server.stop()


def curl_locate(base, credential, seconds):
    result = subprocess.run(["curl", "-s", "-w", "\n%{http_code}", "-X", "POST", "-H", f"Authorization: Bearer {credential}",
                             f"{base}/v1/locate?timeout_secs={seconds}"], capture_output=True, text=True, timeout=60)
    body, _, status = result.stdout.rpartition("\n")
    return int(status), body


async def phone_answering(base, phone_token, reply, connected, stop):
    url = base.replace("http", "ws") + "/v1/device"
    async with websockets.connect(url, additional_headers={"Authorization": f"Bearer {phone_token}"}) as ws:
        await ws.send(json.dumps({"type": "hello", "device_id": str(uuid.uuid4()), "device_name": "Zurich phone",
                                  "platform": "android"}))
        connected.set()
        while not stop.is_set():
            try:
                message = json.loads(await asyncio.wait_for(ws.recv(), 0.2))
            except asyncio.TimeoutError:
                continue
            if message["type"] == "locate" and reply is not None:
                await ws.send(json.dumps({**reply, "id": message["id"], "timestamp_ms": int(time.time() * 1000)}))


def listen_all(instances, notes, stop):
    """Records every notification to the instances' own channels and the broadcast ones."""
    names = {instance_channel(server.instance): server.instance for server in instances}
    with psycopg.connect(ADMIN_URL, autocommit=True) as conn:
        for channel in [*names, *BROADCAST]:
            conn.execute(f'listen "{channel}"')
        while not stop.is_set():
            for note in conn.notifies(timeout=0.2):
                notes.append((names.get(note.channel, note.channel), note.payload))


def test_phone_on_one_instance_answers_an_agent_on_another_for_every_outcome(instances, make_user):
    a, b = instances
    notes, stop_listening = [], threading.Event()
    listener = threading.Thread(target=listen_all, args=(instances, notes, stop_listening))
    listener.start()
    try:
        for reply, status, text in ROWS:
            user, session, email = make_user("Zoe", with_session=True)

            async def scenario():
                connected, stop = asyncio.Event(), asyncio.Event()
                task = asyncio.create_task(phone_answering(a.base, token(user, session, email), reply, connected, stop))
                await asyncio.wait_for(connected.wait(), 10)
                await asyncio.sleep(0.3)
                result = await asyncio.to_thread(curl_locate, b.base, token(user, session, email, client_id=str(uuid.uuid4())), 1)
                stop.set()
                await task
                return result

            got_status, body = asyncio.run(scenario())
            assert got_status == status, (reply, body)
            if text:
                assert body == text
            else:
                fix = json.loads(body)
                assert (fix["latitude"], fix["longitude"]) == (float(LATITUDE), float(LONGITUDE))
                assert fix["device"] == {"name": "Zurich phone", "platform": "android"}
    finally:
        stop_listening.set()
        listener.join()

    # Privacy: no plaintext coordinate in any notification, table or log line.
    # The phone is on A and the agent on B: A hears each locate (and the cancel of the one
    # it never answered), B each answer; only B's answer carries the sealed fix.
    sealed = [json.loads(payload) for channel, payload in notes if '"sealed": "' in payload]
    assert sealed and all(channel == b.instance for channel, payload in notes if '"sealed": "' in payload)
    assert all(note["kind"] == "answer" and note["waiter"] == b.instance for note in sealed)
    at_a = [json.loads(payload)["kind"] for channel, payload in notes if channel == a.instance]
    assert sorted(at_a) == ["cancel"] + ["locate"] * len(ROWS)
    at_b = [json.loads(payload)["kind"] for channel, payload in notes if channel == b.instance]
    assert at_b == ["answer"] * (len(ROWS) - 1)
    for channel, payload in notes:
        assert LATITUDE not in payload and LONGITUDE not in payload, channel
    dump = subprocess.run(["pg_dump", "--data-only", ADMIN_URL], capture_output=True, text=True, timeout=60)
    assert dump.returncode == 0
    assert LATITUDE not in dump.stdout and LONGITUDE not in dump.stdout
    for server in (a, b):
        server.stop()
        assert LATITUDE not in server.logs and LONGITUDE not in server.logs
