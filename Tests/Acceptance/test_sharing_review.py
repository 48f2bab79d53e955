"""Ending a share ends what it allowed at once (docs/security.md, "Sharing"): the viewer's
request still waiting for the owner is cancelled on the owner's phone through the existing
`whereabot_cancel` notification. Real relay, Python `websockets` phone, curl agent."""
import asyncio
import json
import uuid

import websockets

from push_kit import Locate
from relay_server import RelayServer, token


def test_revoking_a_share_cancels_the_viewers_waiting_request(admin, make_user):
    relay = RelayServer()
    try:
        ada, ada_session, ada_email = make_user(name="Ada", with_session=True)
        bob, bob_session, bob_email = make_user(name="Bob", with_session=True)
        admin.execute("insert into public.location_shares (owner_id, viewer_id, viewer_email) values (%s, %s, %s)",
                      (ada, bob, bob_email))

        async def phone():
            url = relay.base.replace("http", "ws") + "/v1/device"
            async with websockets.connect(url, additional_headers={
                    "Authorization": f"Bearer {token(ada, ada_session, ada_email)}"}) as ws:
                await ws.send(json.dumps({"type": "hello", "device_id": str(uuid.uuid4()), "platform": "ios"}))
                call = Locate(relay.base, token(bob, bob_session, bob_email, client_id="bob-agent"), 6, person=ada_email)
                call.start()
                ping = json.loads(await asyncio.wait_for(ws.recv(), 5))
                assert ping["type"] == "locate" and ping["requester"]["email"] == bob_email
                admin.execute("update public.location_shares set revoked_at = now() where owner_id = %s", (ada,))
                cancel = json.loads(await asyncio.wait_for(ws.recv(), 5))
                assert cancel == {"type": "cancel", "id": ping["id"]}
                return call

        call = asyncio.run(phone())
        call.join()
        assert call.status in (503, 504), call.body
        outcome = admin.execute("select outcome from relay.pending_requests where requester_id = %s", (bob,)).fetchone()
        assert outcome == ("abandoned",)
    finally:
        relay.stop()
