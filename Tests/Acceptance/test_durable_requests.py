"""Durable requests over plain HTTP (docs/protocol.md, "Durable requests"), driven by curl and
Python `websockets`: `Prefer: respond-async` → 202, polls from any instance, the creating
instance killed -9, binding to the credential, cancel, bounds, and privacy while waiting and
after."""
import asyncio
import http.client
import json
import os
import signal
import subprocess
import threading
import time
import urllib.parse
import uuid

import psycopg
import pytest
import websockets

from conftest import ADMIN_URL, through_the_api
from relay_server import RelayServer, token
from test_relay_two_instances import LATITUDE, LONGITUDE, EveryNotification

UNKNOWN = "No location request with this id is waiting for you."


def curl(method, url, credential, *extra):
    result = subprocess.run(["curl", "-s", "-D", "-", "-X", method, "-H", f"Authorization: Bearer {credential}", *extra, url],
                            capture_output=True, text=True, timeout=90)
    head, _, body = result.stdout.partition("\n\n")  # text mode turns CRLF into LF
    lines = head.split("\n")
    headers = {name.lower(): value.strip() for name, _, value in (line.partition(":") for line in lines[1:])}
    return int(lines[0].split()[1]), headers, body


def open_async(base, credential, seconds=300):
    return curl("POST", f"{base}/v1/locate?timeout_secs={seconds}", credential, "-H", "Prefer: respond-async")


class Phone:
    """A phone on `base` in a thread of its own; answers each locate after `delay` seconds
    with the fix (or never, with `answer=False`), and records every message it got."""

    def __init__(self, base, phone_token, delay=0.0, answer=True):
        self.base, self.token, self.delay, self.answer = base, phone_token, delay, answer
        self.messages, self.connected, self.stopping = [], threading.Event(), threading.Event()
        self.thread = threading.Thread(target=lambda: asyncio.run(self.run()))
        self.thread.start()
        assert self.connected.wait(10)

    async def run(self):
        url = self.base.replace("http", "ws") + "/v1/device"
        async with websockets.connect(url, additional_headers={"Authorization": f"Bearer {self.token}"}) as ws:
            await ws.send(json.dumps({"type": "hello", "device_id": str(uuid.uuid4()), "device_name": "Zurich phone",
                                      "platform": "android"}))
            await asyncio.sleep(0.3)
            self.connected.set()
            pending = []
            while not self.stopping.is_set():
                try:
                    message = json.loads(await asyncio.wait_for(ws.recv(), 0.1))
                except asyncio.TimeoutError:
                    message = None
                if message:
                    self.messages.append(message)
                    if message["type"] == "locate" and self.answer:
                        pending.append((time.monotonic() + self.delay, message["id"]))
                for due, request in [p for p in pending if p[0] <= time.monotonic()]:
                    pending.remove((due, request))
                    await ws.send(json.dumps({"type": "location", "id": request, "latitude": float(LATITUDE),
                                              "longitude": float(LONGITUDE), "accuracy_m": 7,
                                              "timestamp_ms": int(time.time() * 1000)}))

    def kinds(self, kind):
        return [m for m in self.messages if m["type"] == kind]

    def stop(self):
        self.stopping.set()
        self.thread.join(10)


@pytest.fixture
def three():
    servers = [RelayServer() for _ in range(3)]
    yield servers
    for server in servers:
        if server.process.poll() is None:
            server.stop()


def test_async_request_opened_on_one_instance_is_answered_and_fetched_on_others_after_a_kill(three, make_user):
    a, b, c = three
    user, session, email = make_user("Zoe", with_session=True)
    agent = token(user, session, email, client_id=str(uuid.uuid4()))
    phone = Phone(b.base, token(user, session, email), delay=2.0)
    try:
        status, headers, body = open_async(a.base, agent, 120)
        assert status == 202, body
        opened = json.loads(body)
        assert opened["status"] == "waiting" and opened["request_id"].startswith("wbr_")
        assert headers["location"] == "/v1/locate/requests/" + opened["request_id"]
        assert headers["retry-after"] == "2" and headers["preference-applied"] == "respond-async"
        url = c.base + headers["location"]
        status, _, body = curl("GET", url, agent)
        assert status == 202 and json.loads(body)["request_id"] == opened["request_id"]
        # The creating instance dies while the person still has to answer.
        os.kill(a.process.pid, signal.SIGKILL)
        a.process.wait(10)
        status, _, body = curl("GET", url + "?wait_secs=20", agent)
        assert status == 200, body
        fix = json.loads(body)
        assert (fix["latitude"], fix["longitude"]) == (float(LATITUDE), float(LONGITUDE))
        # The result stays until its TTL, from any instance.
        status, _, again = curl("GET", b.base + headers["location"], agent)
        assert status == 200 and json.loads(again)["latitude"] == fix["latitude"]
    finally:
        phone.stop()


def test_only_the_creating_credential_sees_a_request(three, make_user, admin):
    a, b, _ = three
    ada = make_user("Ada", with_session=True)
    bob = make_user("Bob", with_session=True)
    client = str(uuid.uuid4())
    agent = token(*ada, client_id=client)
    status, headers, body = open_async(a.base, agent)
    assert status == 202, body
    path = headers["location"]
    with through_the_api(admin, ada):
        key_one = admin.execute("select public.create_agent_key('one')").fetchone()[0]
        key_two = admin.execute("select public.create_agent_key('two')").fetchone()[0]
    status, headers_key, body = open_async(a.base, key_one)
    assert status == 202, body
    key_path = headers_key["location"]

    strangers = [token(*bob, client_id=client), token(*ada, client_id=str(uuid.uuid4()))]
    for stranger in strangers:
        for method in ("GET", "DELETE"):
            assert curl(method, b.base + path, stranger)[::2] == (404, UNKNOWN)
    assert curl("GET", b.base + key_path, key_two)[::2] == (404, UNKNOWN)
    assert curl("GET", b.base + key_path, agent)[::2] == (404, UNKNOWN)
    assert curl("GET", b.base + key_path, key_one)[0] == 202
    # A phone credential is refused on agent routes, known id or not.
    assert curl("GET", b.base + path, token(*ada))[0] == 401
    assert curl("GET", b.base + "/v1/locate/requests/wbr_" + "A" * 32, token(*ada))[0] == 401
    # An unknown id reads exactly as another credential's.
    assert curl("GET", b.base + "/v1/locate/requests/wbr_" + "A" * 32, agent)[::2] == (404, UNKNOWN)
    assert curl("GET", b.base + path, agent)[0] == 202


def test_bad_ids_waits_and_polls_are_clear_errors(three, make_user):
    a, _, _ = three
    ada = make_user("Ada", with_session=True)
    agent = token(*ada, client_id=str(uuid.uuid4()))
    _, headers, _ = open_async(a.base, agent)
    path = headers["location"]
    for bad in ["wbr_short", "wbr_" + "A" * 31 + "=", "x" * 36, "wbr_" + "A" * 33, "wbr_" + "A" * 31 + "%2F"]:
        status, _, body = curl("GET", a.base + "/v1/locate/requests/" + bad, agent)
        assert status == 400 and body.startswith("A request id is wbr_"), bad
    for wait in ["61", "-1", "1.5", "x", "999999999999999999999"]:
        status, _, body = curl("GET", f"{a.base}{path}?wait_secs={wait}", agent)
        assert (status, body) == (400, "wait_secs must be a whole number of seconds from 0 to 60."), wait
    for seconds in ["0", "abc"]:
        status, _, body = open_async(a.base, agent, seconds)
        assert (status, body) == (400, "timeout_secs must be a whole number of seconds from 1 to 600."), seconds
    assert curl("PUT", a.base + path, agent)[1]["allow"] == "GET, HEAD, DELETE"
    # Polls: 2 a second with a burst of 2; past that, 429 with Retry-After. Counted against
    # the time the polls took (one keep-alive connection), so a loaded machine, on which
    # three curl processes once took over half a second and the bucket refilled, can neither
    # fail nor pass this by chance.
    connection = http.client.HTTPConnection(urllib.parse.urlsplit(a.base).netloc, timeout=30)
    started, served, refused = time.monotonic(), 0, None
    for _ in range(20):
        connection.request("GET", path, headers={"Authorization": f"Bearer {agent}"})
        response = connection.getresponse()
        response.read()
        if response.status == 429:
            refused = response
            break
        assert response.status == 202
        served += 1
    elapsed = time.monotonic() - started
    connection.close()
    assert refused is not None and refused.getheader("retry-after") == "1", f"{served} polls served in {elapsed:.2f} s"
    assert 2 <= served <= 2 + int(2 * elapsed) + 1, f"{served} polls served in {elapsed:.2f} s"
    time.sleep(1.1)
    assert curl("GET", a.base + path, agent)[0] == 202


def test_twenty_open_durable_requests_per_credential(three, make_user):
    a, _, _ = three
    ada = make_user("Ada", with_session=True)
    agent = token(*ada, client_id=str(uuid.uuid4()))
    statuses = [open_async(a.base, agent)[0] for _ in range(20)]
    assert statuses == [202] * 20
    status, _, body = open_async(a.base, agent)
    assert (status, body) == (429, "Too many location requests are already waiting for this user. "
                                   "Wait for one to finish, then retry.")
    # Another client of the same user has a cap of its own.
    assert open_async(a.base, token(*ada, client_id=str(uuid.uuid4())))[0] == 202


def test_delete_cancels_every_phone_and_forgets_the_request(three, make_user):
    a, b, _ = three
    ada = make_user("Ada", with_session=True)
    agent = token(*ada, client_id=str(uuid.uuid4()))
    phones = [Phone(a.base, token(*ada), answer=False), Phone(b.base, token(*ada), answer=False)]
    try:
        status, headers, _ = open_async(b.base, agent)
        assert status == 202
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline and not all(p.kinds("locate") for p in phones):
            time.sleep(0.05)
        request = phones[0].kinds("locate")[0]["id"]
        assert curl("DELETE", a.base + headers["location"], agent)[0] == 204
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline and not all(p.kinds("cancel") for p in phones):
            time.sleep(0.05)
        assert all([m["id"] for m in p.kinds("cancel")] == [request] for p in phones)
        assert curl("GET", b.base + headers["location"], agent)[::2] == (404, UNKNOWN)
        assert curl("DELETE", b.base + headers["location"], agent)[0] == 404
    finally:
        for phone in phones:
            phone.stop()


def test_no_plaintext_anywhere_and_the_sealed_result_is_gone_after_its_ttl(make_user):
    """Notifications on every channel, a dump of every table while waiting and after, and
    every log line: no coordinate; the sealed result row disappears at its TTL."""
    servers = [RelayServer(LOG_LEVEL="debug"), RelayServer(LOG_LEVEL="debug")]
    a, b = servers
    listener = EveryNotification(servers)
    notes = listener.start()
    ada = make_user("Ada", with_session=True)
    agent = token(*ada, client_id=str(uuid.uuid4()))
    phone = Phone(b.base, token(*ada), delay=1.0)
    try:
        # A short consent window: the result is kept at most 10 minutes past settlement and
        # never past the deadline's 10 minutes; the test shortens it by the deadline.
        status, headers, body = open_async(a.base, agent, 3)
        assert status == 202
        request_id = json.loads(body)["request_id"]
        dumps = [subprocess.run(["pg_dump", "--data-only", ADMIN_URL], capture_output=True, text=True).stdout]
        status, _, body = curl("GET", b.base + headers["location"] + "?wait_secs=10", agent)
        assert status == 200, body
        dumps.append(subprocess.run(["pg_dump", "--data-only", ADMIN_URL], capture_output=True, text=True).stdout)
        with psycopg.connect(ADMIN_URL) as conn:
            sealed = conn.execute("select s.sealed from relay.sealed_results s join relay.pending_requests r"
                                  " on r.id = s.request_id where r.owner_id = %s", (ada[0],)).fetchall()
            assert len(sealed) == 1 and LATITUDE not in sealed[0][0]
            # Past keep_until the result is unknown, and the reaper deletes it.
            conn.execute("update relay.pending_requests set keep_until = now() - interval '1 second'"
                         " where owner_id = %s", (ada[0],))
            conn.commit()
        assert curl("GET", b.base + headers["location"], agent)[::2] == (404, UNKNOWN)
        with psycopg.connect(ADMIN_URL) as conn:
            conn.execute("select relay.reap()")
            conn.commit()
            assert conn.execute("select count(*) from relay.pending_requests where owner_id = %s", (ada[0],)).fetchone()[0] == 0
            assert conn.execute("select count(*) from relay.sealed_results s where not exists"
                                " (select from relay.pending_requests r where r.id = s.request_id)").fetchone()[0] == 0
    finally:
        phone.stop()
        listener.close()
        for server in servers:
            server.stop()
    assert any('"sealed": "' in note for note in notes)
    for text in [*notes, *dumps, *(s.logs for s in servers)]:
        assert LATITUDE not in text and LONGITUDE not in text
    for server in servers:
        assert request_id not in server.logs and request_id[4:] not in server.logs
