"""Notifications in the person's language (docs/protocol.md, "What a notification says"): a
browser phone subscribes to Web Push over its socket saying it speaks German (as the page does
from navigator.languages), an iPhone stores its APNs token with `language` 'de' (as the app does
through the API), and a second phone of the same account subscribes in English. An agent asks
while no phone is connected: the fake Web Push service decrypts each notification (http_ece),
the fake APNs reads its JSON, and each is in its device's language; the agent's answer stays
English."""
import asyncio
import json
import uuid

import websockets

from push_accounts import Owner, push, relay  # noqa: F401,F811 (push and relay are fixtures)
from push_kit import Locate, hex_token, wait_for


async def subscribe(relay, owner, push, path, language):
    """The page's push_subscription over a socket of the owner's device (then it goes away)."""
    endpoint, p256dh, auth = push.web.subscribe(path)
    async with websockets.connect(relay.base.replace("http", "ws") + "/v1/device",
                                  additional_headers={"Authorization": f"Bearer {owner.phone}"}) as ws:
        await ws.send(json.dumps({"type": "hello", "device_id": str(owner.device), "device_name": "Phone",
                                  "platform": "web"}))
        await ws.send(json.dumps({"type": "push_subscription", "endpoint": endpoint,
                                  "keys": {"p256dh": p256dh, "auth": auth}, "language": language}))
        while (reply := json.loads(await asyncio.wait_for(ws.recv(), 10)))["type"] != "push_subscription":
            pass
        assert reply["status"] == "saved", reply


def test_each_notification_is_in_the_language_its_device_registered_in(admin, make_user, push, relay):
    owner = Owner(admin, make_user, push)
    german_token = hex_token()
    admin.execute("insert into public.push_tokens (token, user_id, device_id, environment, language)"
                  " values (%s, %s, %s, 'production', 'de')", (german_token, owner.user, owner.device))
    asyncio.run(subscribe(relay, owner, push, "/sub/lang-de", "de-DE"))
    asyncio.run(subscribe(relay, owner, push, "/sub/lang-en", "en-GB"))
    call = Locate(relay.base, owner.agent, 6).begin()  # the socket just left: its push comes after 2 s
    webs = wait_for(lambda: len(push.web_for(["/sub/lang-de", "/sub/lang-en"])) == 2
                    and push.web_for(["/sub/lang-de", "/sub/lang-en"]), 8)
    apns = wait_for(lambda: push.apns_for([german_token]), 8)
    assert webs and apns, (push.web.pushes, push.apns.pushes)
    bodies = {web["path"]: web["payload"]["body"] for web in webs}
    assert bodies == {"/sub/lang-de": "Dein Agent Claude möchte wissen, wo du bist",
                      "/sub/lang-en": "Your agent Claude wants to know your location"}, bodies
    assert apns[0]["payload"]["aps"]["alert"] == {"title": "Whereabot", "body": "Dein Agent Claude möchte wissen, wo du bist"}
    call.join()
    assert call.status in (503, 504) and call.body.isascii() and "möchte" not in call.body, "agents read English"
    assert admin.execute("select language from public.web_push_subscriptions where user_id = %s order by language",
                         (owner.user,)).fetchall() == [("de",), ("en",)]


def test_a_language_that_is_no_language_is_refused_and_nothing_is_stored(admin, make_user, push, relay):
    owner = Owner(admin, make_user, push)
    endpoint, p256dh, auth = push.web.subscribe("/sub/lang-bad")

    async def scenario():
        async with websockets.connect(relay.base.replace("http", "ws") + "/v1/device",
                                      additional_headers={"Authorization": f"Bearer {owner.phone}"}) as ws:
            await ws.send(json.dumps({"type": "hello", "device_id": str(owner.device), "device_name": "Phone",
                                      "platform": "web"}))
            await ws.send(json.dumps({"type": "push_subscription", "endpoint": endpoint,
                                      "keys": {"p256dh": p256dh, "auth": auth}, "language": "de'; drop table x; --"}))
            await ws.send(json.dumps({"type": "devices"}))
            replies = []
            while not replies or replies[-1].get("type") != "devices":
                replies.append(json.loads(await asyncio.wait_for(ws.recv(), 10)))
            return replies

    replies = asyncio.run(scenario())
    assert not any(reply.get("type") == "push_subscription" for reply in replies), replies
    assert admin.execute("select count(*) from public.web_push_subscriptions where user_id = %s",
                         (owner.user,)).fetchone()[0] == 0
