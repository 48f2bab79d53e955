"""What the push acceptance tests share (test_push.py, test_push_services.py,
test_hostile_push.py): the fakes and a relay as fixtures, an account with one device, its
push targets and an agent, and a socket phone answering in a thread."""
import asyncio
import json
import threading
import time
import uuid

import pytest
import websockets

from conftest import make_oauth_client
from push_kit import Push
from relay_server import RelayServer, token


@pytest.fixture
def push():
    fakes = Push()
    yield fakes
    fakes.stop()


@pytest.fixture
def relay(push):
    server = RelayServer(**push.env)
    yield server
    if server.process.poll() is None:
        server.stop()


class Owner:
    """A user with one device, its push targets, and an agent (OAuth client 'Claude')."""

    def __init__(self, admin, make_user, push, tokens=(), paths=(), always=False, name="Claude"):
        self.user, self.session, self.email = make_user(name="Grace Hopper", with_session=True)
        self.device = uuid.uuid4()
        admin.execute("insert into public.devices (id, user_id, name, platform) values (%s, %s, 'iPhone', 'ios')",
                      (self.device, self.user))
        self.tokens = list(tokens)
        for hex_value in self.tokens:
            admin.execute("insert into public.push_tokens (token, user_id, device_id, environment)"
                          " values (%s, %s, %s, 'production')", (hex_value, self.user, self.device))
        self.paths = list(paths)
        self.subscriptions = {}
        for path in self.paths:
            endpoint, p256dh, auth = push.web.subscribe(path)
            self.subscriptions[path] = endpoint
            admin.execute("insert into public.web_push_subscriptions (endpoint, p256dh, auth, user_id, device_id)"
                          " values (%s, %s, %s, %s, %s)", (endpoint, p256dh, auth, self.user, self.device))
        self.client_id = str(uuid.uuid4())
        make_oauth_client(admin, self.client_id, name)
        if always:
            admin.execute("insert into public.always_allowed_agents (user_id, client_id, client_name) values (%s, %s, %s)",
                          (self.user, self.client_id, name))
        self.agent = token(self.user, self.session, self.email, client_id=self.client_id)
        self.phone = token(self.user, self.session, self.email)
        self.admin, self.name = admin, name

    def agents(self, count):
        """`count` more agents of this user (their own OAuth clients): one agent's repeated ask
        joins the request it already has waiting, so concurrent requests need agents of their own."""
        made = []
        for n in range(count):
            client_id = str(uuid.uuid4())
            make_oauth_client(self.admin, client_id, f"{self.name} {n}")
            made.append(token(self.user, self.session, self.email, client_id=client_id))
        return made


async def socket_phone(base, phone_token, answer, got_ping=None, seconds=20):
    """A phone on /v1/device answering every ping with `answer` (None: ignore)."""
    async with websockets.connect(base.replace("http", "ws") + "/v1/device",
                                  additional_headers={"Authorization": f"Bearer {phone_token}"}) as ws:
        await ws.send(json.dumps({"type": "hello", "device_id": str(uuid.uuid4()), "device_name": "Test phone",
                                  "platform": "ios"}))
        deadline = time.time() + seconds
        while time.time() < deadline:
            try:
                message = json.loads(await asyncio.wait_for(ws.recv(), 0.2))
            except asyncio.TimeoutError:
                continue
            except websockets.ConnectionClosed:
                return  # the relay stopped (1012) at the end of a test
            if message["type"] == "locate":
                if got_ping:
                    got_ping.set()
                if answer:
                    await ws.send(json.dumps({**answer, "id": message["id"], "timestamp_ms": int(time.time() * 1000)}))
                    return


def phone_in_thread(*args, **kwargs):
    thread = threading.Thread(target=lambda: asyncio.run(socket_phone(*args, **kwargs)), daemon=True)
    thread.start()
    return thread


ALLOW = {"type": "location", "latitude": 47.3768866, "longitude": 8.5416940, "accuracy_m": 9}
