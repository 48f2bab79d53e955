"""The topologies people run (docs/deploy.md, "Starting in any order"). A relay started before
its database or Supabase Auth's signing keys becomes ready by itself, and phones that share one
address (behind nginx without PROXY protocol, or a carrier NAT) all come back after a
restart."""
import asyncio
import concurrent.futures
import http.server
import json
import os
import socket
import sys
import threading
import time
import urllib.error
import urllib.request
import uuid

import jwt
import pytest
import websockets
from cryptography.hazmat.primitives.asymmetric import ec
from jwt.algorithms import ECAlgorithm

from faultkit import LOGS, PORT, Postgres, Relay, free_port, open_durable, wait_until

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "Acceptance"))
from front_proxy import Proxy  # noqa: E402

CANNOT_CHECK = "The relay cannot check credentials right now. Retry in a few seconds."
NOT_CONNECTED = "The user's phone is not connected."
STORM_PHONES = 2000


@pytest.fixture(scope="module")
def postgres():
    database = Postgres()
    database.start()
    yield database
    database.stop()


def post_locate(base, agent_token, timeout_secs=1):
    request = urllib.request.Request(f"{base}/v1/locate?timeout_secs={timeout_secs}", method="POST",
                                     headers={"Authorization": "Bearer " + agent_token})
    try:
        with urllib.request.urlopen(request, timeout=timeout_secs + 15) as response:
            return response.status, response.read().decode(), response.headers
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode(), error.headers


async def upgrade(base, phone_token, browser=False):
    """A phone's upgrade: ('refused', status, Retry-After) before it, or ('closed', code,
    reason) when the socket closes without a message, or ('open', socket)."""
    url = base.replace("http://", "ws://") + "/v1/device"
    options = ({"subprotocols": ["whereabot.v1", "whereabot.bearer." + phone_token]} if browser
               else {"additional_headers": {"Authorization": "Bearer " + phone_token}})
    try:
        ws = await websockets.connect(url, open_timeout=5, **options)
    except websockets.InvalidStatus as refused:
        return "refused", refused.response.status_code, refused.response.headers.get("Retry-After")
    try:
        await asyncio.wait_for(ws.recv(), 3)
    except websockets.ConnectionClosed as closed:
        return "closed", closed.rcvd.code, closed.rcvd.reason
    except asyncio.TimeoutError:
        pass
    return "open", ws


def test_a_relay_started_before_its_database_becomes_ready_by_itself(postgres):
    """With Postgres stopped the relay serves at once: /healthz 200, /readyz 503 naming the
    database and why, agents get the documented 503, phones are told when to come back
    (Retry-After before the upgrade, 1013 on a browser's socket); once Postgres starts the
    same process is ready within 6 s and answers."""
    (user, phone_token, agent_token), = postgres.make_users(1)
    postgres.stop()
    relay = Relay("field-early", postgres.relay_url)
    log = LOGS / "field-early.log"
    before = log.stat().st_size if log.exists() else 0
    try:
        relay.start(wait=False)
        pid = relay.process.pid
        assert relay.serving()
        # Its first connection attempt may still be under way ("connecting": clean-clone
        # run 36, on a machine at two thirds of its speed); once it failed, /readyz says why.
        connecting, readiness = (503, f"database 127.0.0.1:{PORT}: connecting\n"), relay.readiness()
        deadline = time.monotonic() + 10
        while readiness == connecting and time.monotonic() < deadline:
            time.sleep(0.05)
            readiness = relay.readiness()
        assert readiness == (503, f"database 127.0.0.1:{PORT}: connection refused\n")
        status, body, headers = post_locate(relay.base, agent_token)
        assert (status, body, headers.get("Retry-After")) == (503, CANNOT_CHECK, "5")
        assert asyncio.run(upgrade(relay.base, phone_token)) == ("refused", 503, "5")
        assert asyncio.run(upgrade(relay.base, phone_token, browser=True)) == ("closed", 1013, "retry after 5")
        postgres.start_server()
        started = time.monotonic()
        wait_until(relay.ready, 6, "ready within 6 s of Postgres starting")
        print(f"\nstart order (database last): ready {time.monotonic() - started:.1f} s after Postgres started")
        assert relay.process.pid == pid and relay.process.poll() is None, "no restart of the process"
        assert relay.readiness() == (200, "ready")
        status, body, _ = post_locate(relay.base, agent_token)
        assert status == 503 and body.startswith(NOT_CONNECTED), "an agent is answered as usual"
        lines = [json.loads(line) for line in log.read_bytes()[before:].decode().splitlines() if line.startswith("{")]
        changes = [(line["event"], line.get("reason")) for line in lines if line["event"] in ("dependency_down", "dependency_up")]
        # One line per change of state, a change of reason included: a Postgres still
        # starting when a connect reached it ("the database system is starting up", seen
        # under load) is a second reason, logged once.
        assert changes in ([("dependency_down", "connection refused"), ("dependency_up", None)],
                           [("dependency_down", "connection refused"), ("dependency_down", "starting up"),
                            ("dependency_up", None)]), changes
    finally:
        relay.stop()
        if not postgres.running():
            postgres.start_server()


class JWKSServer:
    """Supabase Auth's JWKS endpoint, served (or not) on a fixed port."""

    def __init__(self, port, document):
        self.port, self.document = port, document
        self.server = None

    def start(self):
        document = json.dumps(self.document).encode()

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self):
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(document)))
                self.end_headers()
                self.wfile.write(document)

            def log_message(self, *args):
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def stop(self):
        if self.server:
            self.server.shutdown()
            self.server.server_close()


def es256_agent_token(key, kid, user_id, session_id, email):
    now = int(time.time())
    claims = {"sub": str(user_id), "aud": "authenticated", "role": "authenticated", "email": email,
              "session_id": str(session_id), "client_id": "field-agent", "iat": now, "exp": now + 3600}
    return jwt.encode(claims, key, algorithm="ES256", headers={"kid": kid})


@pytest.mark.parametrize("down", ["refused", "silent"])
def test_a_relay_started_before_its_signing_keys_becomes_ready_by_itself(postgres, down):
    """With the JWKS URL refusing connections (or accepting and never answering) the relay
    serves, /readyz names the keys' URL and why, a token signed with a key gets the 503 to
    retry (not a 401); once the JWKS answers the relay is ready and the token works."""
    user, session = uuid.uuid4(), uuid.uuid4()
    email = f"{user.hex[:12]}@faults.example"
    postgres.query("insert into auth.users (id, aud, role, email, raw_user_meta_data, created_at, updated_at)"
                   " values (%s, 'authenticated', 'authenticated', %s, '{}', now(), now())", (user, email))
    postgres.query("insert into auth.sessions (id, user_id, created_at) values (%s, %s, now())", (session, user))
    key = ec.generate_private_key(ec.SECP256R1())
    jwk = json.loads(ECAlgorithm.to_jwk(key.public_key()))
    jwk.update({"kid": "field-key", "alg": "ES256", "use": "sig"})
    token = es256_agent_token(key, "field-key", user, session, email)
    port = free_port()
    url = f"http://127.0.0.1:{port}/auth/v1/.well-known/jwks.json"
    silent = None
    if down == "silent":  # accepts, never answers: the fetch times out after 5 s
        silent = socket.socket()
        silent.bind(("127.0.0.1", port))
        silent.listen(64)
    relay = Relay(f"field-keys-{down}", postgres.relay_url, SUPABASE_JWKS_URL=url)
    jwks = JWKSServer(port, {"keys": [jwk]})
    try:
        relay.start(wait=False)
        reason = "connection refused" if down == "refused" else "timeout"
        wait_until(lambda: relay.readiness() == (503, f"signing keys {url}: {reason}\n"), 15, f"/readyz naming the keys ({reason})")
        status, body, headers = post_locate(relay.base, token)
        assert (status, body, headers.get("Retry-After")) == (503, CANNOT_CHECK, "5")
        if silent:
            silent.close()
        jwks.start()
        started = time.monotonic()
        wait_until(relay.ready, 6 if down == "refused" else 11, "ready once the JWKS answers")
        print(f"\nstart order (JWKS last, {down}): ready {time.monotonic() - started:.1f} s after the JWKS answered")
        status, body, _ = post_locate(relay.base, token)
        assert status == 503 and body.startswith(NOT_CONNECTED), f"the ES256 token verifies: {status} {body}"
        jwks.stop()  # the JWKS goes away later: the keys already read keep working
        assert post_locate(relay.base, token)[1].startswith(NOT_CONNECTED)
        assert relay.readiness() == (200, "ready")
    finally:
        relay.stop()
        jwks.stop()
        if silent:
            silent.close()


class StormPhones:
    """Phones that share one address (all behind nginx): each says hello, keeps the ids of
    the pings it got, reconnects after any close but 4000, and obeys a refusal's Retry-After
    (or 1013 "retry after N"); refusals and what they asked are recorded."""

    def __init__(self, users, url):
        self.users, self.url = users, url
        self.loop = asyncio.new_event_loop()
        self.connected, self.pings, self.refusals, self.stopping = set(), {}, [], False
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)

    def start(self):
        self.thread.start()
        for user, phone_token, _ in self.users:
            asyncio.run_coroutine_threadsafe(self.phone(user, phone_token), self.loop)

    def stop(self):
        self.stopping = True

        async def cancel_all():
            tasks = [task for task in asyncio.all_tasks() if task is not asyncio.current_task()]
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

        asyncio.run_coroutine_threadsafe(cancel_all(), self.loop).result(timeout=30)
        self.loop.call_soon_threadsafe(self.loop.stop)

    async def phone(self, user, phone_token):
        device = str(uuid.uuid4())
        while not self.stopping:
            wait = 1.0
            try:
                async with websockets.connect(self.url + "/v1/device", open_timeout=20, ping_interval=None,
                                              additional_headers={"Authorization": "Bearer " + phone_token}) as ws:
                    await ws.send(json.dumps({"type": "hello", "app_version": "storm", "device_id": device,
                                              "device_name": "Storm phone", "platform": "ios"}))
                    self.connected.add(user)
                    async for text in ws:
                        message = json.loads(text)
                        if message.get("type") == "locate":
                            self.pings.setdefault(user, []).append((time.monotonic(), message["id"]))
            except websockets.ConnectionClosed as closed:
                if closed.rcvd is not None and closed.rcvd.code == 4000:
                    return
                if closed.rcvd is not None and closed.rcvd.code == 1013:
                    wait = int(closed.rcvd.reason.rsplit(" ", 1)[-1])
                    self.refusals.append((user, time.monotonic(), wait))
            except websockets.InvalidStatus as refused:
                asked = refused.response.headers.get("Retry-After")
                if asked is not None:
                    wait = int(asked)
                    self.refusals.append((user, time.monotonic(), wait))
            except (OSError, asyncio.TimeoutError, websockets.InvalidHandshake):
                pass
            self.connected.discard(user)
            await asyncio.sleep(wait * (1 + 0.2 * (hash(device) % 100) / 100))


def test_a_storm_from_one_address_behind_nginx(postgres):
    """2,000 phones behind nginx (one address to the relay, which trusts nginx but finds
    every client at 127.0.0.1) reconnect within 10 s of a restart and each gets its pending
    ping; none is refused for sharing the address, and none is refused more than its
    Retry-After says."""
    users = postgres.make_users(STORM_PHONES)
    relay = Relay("field-storm", postgres.relay_url)
    relay.start()
    nginx = Proxy("nginx", relay)
    phones = StormPhones(users, nginx.base.replace("http://", "ws://"))
    try:
        phones.start()
        wait_until(lambda: len(phones.connected) == STORM_PHONES, 120, "every phone connected through nginx")
        assert phones.refusals == [], "no phone was refused for sharing one address"
        with concurrent.futures.ThreadPoolExecutor(max_workers=16) as pool:
            opened = list(pool.map(lambda u: open_durable(nginx.base, u[2]), users))
        assert all(opened), "every pending request opened"
        wait_until(lambda: len(phones.pings) == STORM_PHONES, 60, "every phone pinged before the restart")
        relay.terminate()
        relay.wait(30)
        phones.pings.clear()
        relay.start(wait=False)
        restarted = time.monotonic()
        wait_until(lambda: len(phones.pings) == STORM_PHONES, 10, "every phone back and pinged within 10 s")
        took = max(pings[0][0] for pings in phones.pings.values()) - restarted
        print(f"\nstorm behind nginx: {STORM_PHONES} phones from one address back with their pings "
              f"{took:.1f} s after the restart; {len(phones.refusals)} refusals")
        assert all(wait <= 10 for _, _, wait in phones.refusals)
        for user, at, wait in phones.refusals:  # a refused phone was asked back, not dropped
            assert phones.pings[user][0][0] >= at, "a refused phone came back as told"
    finally:
        phones.stop()
        nginx.stop()
        relay.stop()
