"""What belongs to one account cannot be claimed by another (docs/security.md, "Sharing"
and "One account never degrades another").

5. A share waiting for an email address went to any new account with that address, before
   it was confirmed: whoever signed up first with the address could ask where the owner was.
6. A push subscription saved by one account could be taken over by a second account that
   knew its endpoint (the upsert moved the row to the second account, which could then
   delete it).
Real relays, psycopg as Supabase Auth and the API would write, `curl`, Python `websockets`.
"""
import asyncio
import json
import uuid

import pytest
import websockets

from conftest import through_the_api
from push_accounts import push, relay  # noqa: F401,F811 (fixtures)
from push_kit import Locate
from relay_server import token
from test_hostile import user

NOBODY = "Nobody named {} shares their location with you. Ask them to share it with you in Whereabot."


def as_user(admin, who, sql, params=()):
    """Runs `sql` as the user's own session would through Supabase's API."""
    with through_the_api(admin, who):
        return admin.execute(sql, params).fetchone()


def test_a_waiting_share_goes_only_to_an_account_that_confirmed_the_address(relay, admin):
    ada = user(admin, "Ada")
    admin.execute("update auth.users set email_confirmed_at = now() where id = %s", (ada[0],))
    invited = f"carol-{uuid.uuid4().hex[:8]}@example.com"
    as_user(admin, ada, "select public.share_location_with(%s)", (invited,))
    # Mallory signs up first with the invited address; Supabase has not confirmed it.
    mallory = user(admin, "Mallory", invited)
    assert admin.execute("select email_confirmed_at from auth.users where id = %s", (mallory[0],)).fetchone() == (None,)
    agent = token(mallory[0], mallory[1], mallory[2], client_id="mallory-agent")
    call = Locate(relay.base, agent, 2, person=ada[2])
    call.run()
    assert (call.status, call.body) == (404, NOBODY.format(ada[2])), "no share before the address is confirmed"
    # Carol (who owns the address) confirms it: the share is hers now.
    admin.execute("update auth.users set email_confirmed_at = now() where id = %s", (mallory[0],))
    call = Locate(relay.base, agent, 1, person=ada[2])
    call.run()
    assert call.status == 503, f"the share reached the confirmed account: {call.status} {call.body}"


async def browser_phone(relay, who, device):
    ws = await websockets.connect(relay.base.replace("http", "ws") + "/v1/device",
                                  additional_headers={"Authorization": f"Bearer {token(who[0], who[1], who[2])}"})
    await ws.send(json.dumps({"type": "hello", "device_id": str(device), "device_name": "Chrome", "platform": "web",
                              "app_version": "web-1"}))
    return ws


async def reply(ws, kind="push_subscription"):
    while True:
        message = json.loads(await asyncio.wait_for(ws.recv(), 5))
        if message.get("type") == kind and "status" in message:
            return message


def test_another_account_cannot_take_over_a_push_subscription(relay, push, admin):
    alice, mallory = user(admin, "Alice"), user(admin, "Mallory")
    endpoint, p256dh, auth = push.web.subscribe("/alice/1")
    _, other_p256dh, other_auth = push.web.subscribe("/mallory/1")

    async def scenario():
        alice_ws = await browser_phone(relay, alice, uuid.uuid4())
        await alice_ws.send(json.dumps({"type": "push_subscription", "endpoint": endpoint, "p256dh": p256dh, "auth": auth}))
        assert (await reply(alice_ws))["status"] == "saved"
        mallory_ws = await browser_phone(relay, mallory, uuid.uuid4())
        await mallory_ws.send(json.dumps({"type": "push_subscription", "endpoint": endpoint, "p256dh": other_p256dh,
                                          "auth": other_auth}))
        refused = await reply(mallory_ws)
        assert (refused["status"], refused.get("reason")) == ("refused", "taken")
        # Mallory's "delete my subscriptions" touches only hers.
        await mallory_ws.send(json.dumps({"type": "push_subscription", "endpoint": None}))
        await asyncio.sleep(0.5)
        await alice_ws.close()
        await mallory_ws.close()

    asyncio.run(scenario())
    rows = admin.execute("select user_id, p256dh, auth from public.web_push_subscriptions where endpoint = %s",
                         (endpoint,)).fetchall()
    assert rows == [(alice[0], p256dh, auth)], "the subscription is still Alice's, with her keys"
    # Through the API too: Mallory's upsert of the endpoint changes nothing.
    with pytest.raises(Exception):
        as_user(admin, mallory, "insert into public.web_push_subscriptions (endpoint, p256dh, auth, user_id)"
                " values (%s, %s, %s, %s) on conflict (endpoint) do update set user_id = excluded.user_id returning 1",
                (endpoint, other_p256dh, other_auth, mallory[0]))
    assert admin.execute("select user_id from public.web_push_subscriptions where endpoint = %s", (endpoint,)).fetchall() \
        == [(alice[0],)]
