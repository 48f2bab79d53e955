"""Hostile input, round 4: a banned or deleted user is refused on every path.

The attack: a user the operator bans (auth.users.banned_until in the future) or deletes
softly (deleted_at set) keeps what they had. relay.agent_key_owner refused such a user's
agent keys, but the session check the relay makes for every agent's token (cached 4 s)
and for every phone socket did not, and nothing closed their phone's socket: their agents
kept asking and their phone kept answering.

Now relay.session_states treats a banned or deleted user's sessions as signed out, the
heartbeat closes their sockets (revoked, 4000), and their agent keys are dropped from
every instance's cache, so each path is refused within a few seconds (docs/agents.md,
"Credentials"). Real relay and Postgres; curl for the agents, Python `websockets` for
the phone, the ban and the soft deletion written as Supabase Auth writes them.
"""
import asyncio
import json
import subprocess
import threading
import uuid

import pytest
import websockets

from conftest import through_the_api
from push_kit import wait_for
from relay_server import RelayServer, token


@pytest.fixture
def relay():
    server = RelayServer()
    yield server
    server.stop()


def mcp_status(base, credential):
    """An agent's call: MCP tools/list, as any client makes it first."""
    result = subprocess.run(["curl", "-s", "-o", "/dev/null", "-w", "%{http_code}", "-X", "POST", "-H",
                             f"Authorization: Bearer {credential}", "-H", "Content-Type: application/json",
                             "-H", "Accept: application/json, text/event-stream", f"{base}/mcp",
                             "--data", '{"jsonrpc":"2.0","id":1,"method":"tools/list"}'],
                            capture_output=True, text=True, timeout=30)
    return int(result.stdout)


class Phone:
    """A phone socket in a thread of its own: says hello and waits until the relay closes it."""

    def __init__(self, base, phone_token):
        self.url, self.token = base.replace("http", "ws") + "/v1/device", phone_token
        self.ready, self.closed = threading.Event(), threading.Event()
        self.close_code = None
        self.thread = threading.Thread(target=lambda: asyncio.run(self.run()), daemon=True)
        self.thread.start()
        assert self.ready.wait(10), "the phone connected"

    async def run(self):
        async with websockets.connect(self.url, additional_headers={"Authorization": f"Bearer {self.token}"}) as ws:
            await ws.send(json.dumps({"type": "hello", "device_id": str(uuid.uuid4()), "device_name": "Phone",
                                      "platform": "android"}))
            await asyncio.sleep(0.5)
            self.ready.set()
            try:
                for _ in range(600):
                    try:
                        await asyncio.wait_for(ws.recv(), 0.1)
                    except asyncio.TimeoutError:
                        pass
            except websockets.ConnectionClosed as closed:
                self.close_code = closed.rcvd.code if closed.rcvd else None
                self.closed.set()


async def reconnect(base, phone_token):
    """A new socket with the same session: the HTTP status that refused it, or its close code."""
    try:
        async with websockets.connect(base.replace("http", "ws") + "/v1/device",
                                      additional_headers={"Authorization": f"Bearer {phone_token}"}) as ws:
            await ws.send(json.dumps({"type": "hello", "device_id": str(uuid.uuid4()), "platform": "android"}))
            await asyncio.wait_for(ws.recv(), 5)
            return "open"
    except websockets.InvalidStatus as refused:
        return refused.response.status_code
    except websockets.ConnectionClosed as closed:
        return closed.rcvd.code if closed.rcvd else None


@pytest.mark.parametrize("refusal", ["banned_until = now() + interval '1 day'", "deleted_at = now()"])
def test_a_banned_or_deleted_users_agents_and_phone_are_refused_within_seconds(relay, admin, make_user, refusal):
    who = make_user("Mallory", with_session=True)
    user, session, email = who
    agent = token(user, session, email, client_id=str(uuid.uuid4()))
    with through_the_api(admin, who) as api:
        key = api.execute("select public.create_agent_key('nightly')").fetchone()[0]
    assert mcp_status(relay.base, agent) == 200
    assert mcp_status(relay.base, key) == 200  # now in the relay's key cache
    phone = Phone(relay.base, token(user, session, email))
    assert not phone.closed.is_set()

    admin.execute(f"update auth.users set {refusal} where id = %s", (user,))

    # The session check is cached 4 s and the heartbeat runs every 5 s: a generous bound.
    assert wait_for(lambda: mcp_status(relay.base, agent) == 401, 20), "the agent's token is refused"
    assert wait_for(lambda: mcp_status(relay.base, key) == 401, 20), "the agent key is refused"
    assert phone.closed.wait(20), "the phone's socket is closed"
    assert phone.close_code == 4000, phone.close_code
    # And the phone cannot come back.
    assert asyncio.run(reconnect(relay.base, token(user, session, email))) == 401
