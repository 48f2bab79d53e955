"""Hostile input, round 4: creating and revoking in a loop is bounded.

The attack: the caps on agent keys (25) and location shares (100) counted live rows only,
and a revoked row was never deleted. So one phone socket created and revoked agent keys
in a loop (thousands in seconds, every revocation a NOTIFY to every relay instance), and
one session did the same with shares (or created and deleted them).

Now every creation counts for an hour whatever became of it: 25 agent keys and 20 shares
an account may create in any hour, revoked (or deleted) ones included; the next is
refused as the caps are (docs/agents.md, "Credentials"), and revoked rows are deleted after
30 days by the relay's periodic sweep. Real relay and Postgres; the keys through the phone
socket (Python `websockets`) as the browser phone makes them, the shares through the
API's functions as Supabase's API runs them for the user's session.
"""
import asyncio
import json
import uuid

import psycopg
import pytest
import websockets

from conftest import through_the_api
from relay_server import RelayServer, token

ATTEMPTS = 40


@pytest.fixture
def relay():
    server = RelayServer()
    yield server
    server.stop()


class Socket:
    """A phone socket that asks its account for things and waits for each reply, waiting
    out the relay's own per-socket pace (a `too_many` error) when it answers with one."""

    def __init__(self, ws):
        self.ws = ws

    async def ask(self, message, reply_type):
        while True:
            await self.ws.send(json.dumps(message))
            while True:
                reply = json.loads(await asyncio.wait_for(self.ws.recv(), 10))
                if reply["type"] in (reply_type, "error"):
                    break
            if reply["type"] == "error" and reply.get("reason") == "too_many":
                await asyncio.sleep(reply["retry_after_s"])
                continue
            return reply


async def create_and_revoke_keys(base, phone_token):
    """Creates and revokes agent keys one after the other until a creation is refused (or
    ATTEMPTS were made); returns how many were made and the refusal."""
    async with websockets.connect(base.replace("http", "ws") + "/v1/device",
                                  additional_headers={"Authorization": f"Bearer {phone_token}"}) as ws:
        await ws.send(json.dumps({"type": "hello", "device_id": str(uuid.uuid4()), "device_name": "Attacker",
                                  "platform": "web", "app_version": "1"}))
        socket = Socket(ws)
        made = 0
        for n in range(ATTEMPTS):
            reply = await socket.ask({"type": "agent_key_create", "name": f"key {n}"}, "agent_keys")
            if "created" not in reply:
                return made, reply
            made += 1
            (key,) = reply["keys"]  # the one just made: every earlier one was revoked
            reply = await socket.ask({"type": "agent_key_revoke", "id": key["id"]}, "agent_keys")
            assert reply["keys"] == [], reply
        return made, None


def test_a_phone_creating_and_revoking_agent_keys_in_a_loop_stops_at_25_an_hour(relay, admin, make_user):
    user, session, email = make_user("Mallory", with_session=True)
    made, refusal = asyncio.run(create_and_revoke_keys(relay.base, token(user, session, email)))
    assert made == 25, f"{made} keys created and revoked in a row"
    assert refusal == {"type": "agent_keys", "keys": [], "error": "refused"}, refusal
    rows = admin.execute("select count(*), count(revoked_at) from public.agent_keys where user_id = %s", (user,)).fetchone()
    assert rows == (25, 25)


def test_a_session_creating_and_revoking_or_deleting_shares_in_a_loop_stops_at_20_an_hour(admin, make_user):
    who = make_user("Mallory", with_session=True)
    made, refused = 0, None
    for n in range(ATTEMPTS):
        try:
            with through_the_api(admin, who) as api:
                share = api.execute("select public.share_location_with(%s)", (f"friend{n}@test.example",)).fetchone()[0]
                if n % 2:
                    api.execute("select public.revoke_location_share(%s)", (share,))
                else:
                    api.execute("delete from public.location_shares where id = %s", (share,))
            made += 1
        except psycopg.Error as error:
            refused = error
            break
    assert made == 20, f"{made} shares created and ended in a row"
    assert refused is not None and refused.sqlstate == "54000", refused
    assert "revoked ones included" in str(refused)
    rows = admin.execute("select count(*), count(revoked_at) from public.location_shares where owner_id = %s",
                         (who[0],)).fetchone()
    assert rows == (10, 10), "the revoked half is kept (until the sweep), the deleted half is gone"
