"""Hostile input, round 4 (docs/security.md, "Under floods"), the relay's side: four attacks
that worked, each run as the outside review ran it, against real relays and a real Postgres,
with Python `websockets`, `urllib` and PyJWT as the attacker's clients.

1. Settings floods: one account's eight sockets sent eight-window quiet_hours messages back
   to back (each read the whole time-zone database, ~250 ms of one of the instance's
   connections); another user's locate went from 2 ms to 1.4 s. Now a socket and an account
   have a budget of account requests, and the zone check is an index probe.
2. A JWKS key withdrawn after a leak stayed trusted (the JWKS was read at start and on an
   unknown key id only): it is now read again on a schedule, and the key is refused within
   one refresh.
3. A key revoked while the LISTEN connection was down kept working for its whole cache
   lifetime: a reconnect now forgets every cached key and session.
4. Behind TRUSTED_PROXIES a routed /56 held 256 failure budgets (one per /64): the /56 and
   /48 now have budgets of their own.
"""
import asyncio
import base64
import json
import secrets
import socket
import threading
import time
import urllib.parse
import uuid
from http import server as http_server

import jwt
import pytest
import websockets
from cryptography.hazmat.primitives.asymmetric import ec

from conftest import RELAY_URL
from relay_server import RelayServer, token
from test_hostile import agent_key, agent_token, http, phone_token, user

EIGHT_WINDOWS = [{"days": [1, 2, 3, 4, 5, 6, 7], "start": f"{hour:02d}:00", "end": f"{hour:02d}:30",
                  "time_zone": zone} for hour, zone in enumerate(
    ["Europe/Berlin", "America/New_York", "Asia/Tokyo", "Australia/Sydney", "Africa/Cairo", "America/Sao_Paulo",
     "Asia/Kolkata", "Pacific/Auckland"])]


@pytest.fixture(scope="module")
def relay():
    server = RelayServer()
    yield server
    if server.process.poll() is None:
        server.stop()


def test_a_settings_flood_from_eight_sockets_is_held_to_the_accounts_budget(relay, admin):
    """Eight sockets of one account send eight-window quiet_hours messages as fast as their
    replies come for 4 s: past the account's budget (a burst of 20, then 2 a second) each
    gets `too_many` with how long to wait, and the database stores no more than the budget
    allows; another user's locates (their phone answers at once) are answered throughout
    (their times are printed, not asserted)."""
    attacker, bystander = user(admin, "Flooder"), user(admin, "Bystander")
    replies, bystander_times = [], []

    async def connect(who):
        ws = await websockets.connect(relay.base.replace("http", "ws") + "/v1/device",
                                      additional_headers={"Authorization": f"Bearer {phone_token(who)}"})
        await ws.send(json.dumps({"type": "hello", "device_id": str(uuid.uuid4()), "device_name": "P",
                                  "platform": "android"}))
        return ws

    async def flood(seconds):
        sockets = [await connect(attacker) for _ in range(8)]
        phone = await connect(bystander)
        answers = asyncio.ensure_future(answer_every_ping(phone))
        await asyncio.sleep(0.5)
        started = time.monotonic()

        async def one(ws):
            while time.monotonic() - started < seconds:
                await ws.send(json.dumps({"type": "quiet_hours", "windows": EIGHT_WINDOWS}))
                while True:
                    message = json.loads(await asyncio.wait_for(ws.recv(), 10))
                    if message["type"] in ("quiet_hours", "error"):
                        replies.append(message)
                        break

        async def locates():
            while time.monotonic() - started < seconds:
                begun = time.monotonic()
                status, _, _ = await asyncio.to_thread(http, relay.base, "POST", "/v1/locate?timeout_secs=5",
                                                       agent_token(bystander))
                assert status == 200, "the bystander's phone answered"
                bystander_times.append(time.monotonic() - begun)
                await asyncio.sleep(0.1)
        await asyncio.gather(*(one(ws) for ws in sockets), locates())
        elapsed = time.monotonic() - started
        answers.cancel()
        for ws in sockets + [phone]:
            await ws.close()
        return elapsed

    elapsed = asyncio.run(flood(4))
    stored = [r for r in replies if r["type"] == "quiet_hours"]
    refused = [r for r in replies if r["type"] == "error"]
    bystander_times.sort()
    print(f"\nsettings flood: {len(stored)} stored, {len(refused)} refused in {elapsed:.1f} s; the bystander's "
          f"{len(bystander_times)} locates: median {bystander_times[len(bystander_times) // 2] * 1000:.1f} ms, "
          f"worst {bystander_times[-1] * 1000:.1f} ms")
    assert stored and len(stored[-1]["windows"]) == 8, "the account's own changes within its budget are stored"
    assert len(stored) <= 20 + 2 * elapsed + 2, f"{len(stored)} changes in {elapsed:.1f} s: over the account's budget"
    assert refused and all(r["reason"] == "too_many" and r["retry_after_s"] >= 1 for r in refused), refused[:3]


class KeySet:
    """A JWKS endpoint (Cache-Control: max-age=1) whose keys a test can withdraw."""

    def __init__(self):
        self.keys = {kid: ec.generate_private_key(ec.SECP256R1()) for kid in ("leaked", "current")}
        self.published = set(self.keys)
        keyset = self

        class Handler(http_server.BaseHTTPRequestHandler):
            def do_GET(self):
                body = json.dumps({"keys": [keyset.jwk(kid) for kid in sorted(keyset.published)]}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Cache-Control", "public, max-age=1")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args):
                pass

        self.server = http_server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/auth/v1/.well-known/jwks.json"

    def jwk(self, kid):
        numbers = self.keys[kid].public_key().public_numbers()

        def b64(value):
            return base64.urlsafe_b64encode(value.to_bytes(32, "big")).decode().rstrip("=")
        return {"kty": "EC", "crv": "P-256", "x": b64(numbers.x), "y": b64(numbers.y), "kid": kid, "alg": "ES256",
                "use": "sig"}

    def agent(self, kid, who):
        """A freshly signed agent token of `who` under key `kid`, as Supabase Auth signs them."""
        now = int(time.time())
        claims = {"sub": str(who[0]), "aud": "authenticated", "role": "authenticated", "email": who[2],
                  "session_id": str(who[1]), "client_id": "leak-test-agent", "iat": now, "exp": now + 3600}
        return jwt.encode(claims, self.keys[kid], algorithm="ES256", headers={"kid": kid})


def test_a_withdrawn_signing_key_is_refused_within_one_refresh(admin):
    """The provider withdraws a leaked key from its JWKS: a token freshly signed with it goes
    from 503 (let in; no phone) to 401 within one refresh (the JWKS says max-age=1; the
    relay's floor is lowered to 1 s for the test), while the current key keeps working."""
    keys = KeySet()
    relay = RelayServer(SUPABASE_JWKS_URL=keys.url, JWKS_MIN_REFRESH_SECONDS="1")
    try:
        ada = user(admin, "Ada")
        for kid in ("leaked", "current"):
            assert http(relay.base, "POST", "/v1/locate?timeout_secs=1", keys.agent(kid, ada))[0] == 503, kid
        keys.published = {"current"}
        deadline = time.monotonic() + 15
        while http(relay.base, "POST", "/v1/locate?timeout_secs=1", keys.agent("leaked", ada))[0] != 401:
            assert time.monotonic() < deadline, "the withdrawn key is still trusted 15 s later"
            time.sleep(0.5)
        assert http(relay.base, "POST", "/v1/locate?timeout_secs=1", keys.agent("current", ada))[0] == 503
    finally:
        relay.stop()
        keys.server.shutdown()


class Blip:
    """A TCP forwarder for the relay's LISTEN connection (LISTEN_DATABASE_URL) that can cut it
    and refuse to connect for a while, as a network blip or a failover would."""

    def __init__(self, target_port):
        self.target_port, self.connections, self.open = target_port, [], threading.Event()
        self.open.set()
        self.listening = socket.create_server(("127.0.0.1", 0))
        self.port = self.listening.getsockname()[1]
        threading.Thread(target=self.accept, daemon=True).start()

    def accept(self):
        while True:
            client, _ = self.listening.accept()
            if not self.open.is_set():
                client.close()  # down: the relay's reconnects fail and back off
                continue
            upstream = socket.create_connection(("127.0.0.1", self.target_port))
            self.connections += [client, upstream]
            for source, sink in ((client, upstream), (upstream, client)):
                threading.Thread(target=self.pipe, args=(source, sink), daemon=True).start()

    @staticmethod
    def pipe(source, sink):
        try:
            while data := source.recv(65536):
                sink.sendall(data)
        except OSError:
            pass
        for end in (source, sink):
            try:
                end.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def cut(self):
        self.open.clear()
        for connection in self.connections:
            try:
                connection.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        self.connections = []


def test_a_key_revoked_while_the_listener_is_down_is_refused_once_it_is_back(admin):
    """The relay's LISTEN connection is cut and cannot come back for 3 s; an agent key it has
    cached is revoked in the gap (its notification is lost); the listener comes back: the key
    gets no more fixes from the owner's phone (which answers every ping) within the session
    check's 5 s of that, not for the rest of its 60-s cache lifetime."""
    target = urllib.parse.urlparse(RELAY_URL)
    blip = Blip(target.port)
    relay = RelayServer(LISTEN_DATABASE_URL=RELAY_URL.replace(f":{target.port}/", f":{blip.port}/"))
    owner = user(admin, "Revoker")
    key = agent_key(admin, owner)

    async def scenario():
        phone = await websockets.connect(relay.base.replace("http", "ws") + "/v1/device",
                                         additional_headers={"Authorization": f"Bearer {phone_token(owner)}"})
        await phone.send(json.dumps({"type": "hello", "device_id": str(uuid.uuid4()), "device_name": "P",
                                     "platform": "android"}))
        answers = asyncio.ensure_future(answer_every_ping(phone))
        await asyncio.sleep(0.5)
        locate = lambda: asyncio.to_thread(http, relay.base, "POST", "/v1/locate?timeout_secs=5", key)  # noqa: E731
        assert (await locate())[0] == 200, "the key gets a fix, and is cached"
        blip.cut()
        await asyncio.sleep(0.5)
        admin.execute("update public.agent_keys set revoked_at = now() where user_id = %s", (owner[0],))
        await asyncio.sleep(2.5)
        blip.open.set()
        deadline = time.monotonic() + 40
        while not blip.connections:
            assert time.monotonic() < deadline, "the listener comes back"
            await asyncio.sleep(0.05)
        back, fixes = time.monotonic(), 0
        while (status := (await locate())[0]) != 401:
            fixes += status == 200
            assert time.monotonic() - back < 8, f"the revoked key got {fixes} fixes in the 8 s after the listener came back"
            await asyncio.sleep(0.25)
        answers.cancel()
        await phone.close()

    try:
        asyncio.run(scenario())
    finally:
        relay.stop()


async def answer_every_ping(ws):
    """A phone that answers every ping with a fix at once."""
    async for raw in ws:
        message = json.loads(raw)
        if message["type"] == "locate":
            await ws.send(json.dumps({"type": "location", "id": message["id"], "latitude": 1.5, "longitude": 2.5,
                                      "accuracy_m": 5, "timestamp_ms": int(time.time() * 1000)}))


def test_a_routed_56_gets_one_failure_budget_not_one_per_64(admin):
    """Behind a trusted proxy, 300 random keys from 300 random addresses of one /56 (each a
    different /64): after the /56's budget (a burst of 40, 4 a second back), they get 429
    without a database lookup; a /64 of another /48 is not affected."""
    relay = RelayServer(TRUSTED_PROXIES="127.0.0.1")
    try:
        prefix = "2001:db8:5600:aa"  # a /56: 2001:db8:5600:aa00::/56
        answers = []
        for n in range(300):
            address = f"{prefix}{n % 256:02x}:{secrets.randbelow(65536):x}::{secrets.randbelow(65536):x}"
            answers.append(http(relay.base, "POST", "/v1/locate?timeout_secs=1", "wb_" + secrets.token_hex(32),
                                headers={"X-Forwarded-For": address})[0])
        assert set(answers) <= {401, 429} and answers.count(429) >= 150, \
            f"{answers.count(401)} lookups, {answers.count(429)} refused"
        assert http(relay.base, "POST", "/v1/locate?timeout_secs=1", "wb_" + secrets.token_hex(32),
                    headers={"X-Forwarded-For": "2001:db8:7700::1"})[0] == 401, "another /48's budget is its own"
    finally:
        relay.stop()
