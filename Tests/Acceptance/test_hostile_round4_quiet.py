"""Hostile input, round 4: quiet hours hold for a request that was already open.

The attack: an agent opens a durable request (`Prefer: respond-async`, up to 600 s) a
minute before the person's quiet hours begin. Quiet hours were checked only when a request
opened, so during the window the phone that connected was still pinged with the request
(the pings waiting on hello, the backstop poll) and the re-alert push still went out.

Now every later ping and push of an open request asks quiet hours again, by the rule
relay.open_request uses (docs/agents.md, "Quiet hours"): the request stays open, and
reaches the phone once the window is over. Real relay, real Postgres, curl for the agent,
Python `websockets` for the phones, the fake APNs for the pushes. A control account,
asked the same way at the same time without a window, gets its ping and its re-alert.
"""
import datetime
import time

from push_accounts import Owner, push  # noqa: F401 (push is a fixture)
from push_kit import hex_token, wait_for
from relay_server import RelayServer
from test_durable_requests import Phone, curl, open_async


def window_around_now():
    """A window holding now (UTC, every day) from a minute ago to 30 minutes ahead, as
    HH:MM. Near midnight its end is earlier than its start: a window crossing midnight,
    which holds from its start on one of its days to its end the next day (every day here)."""
    now = datetime.datetime.now(datetime.timezone.utc)
    start, end = now - datetime.timedelta(minutes=1), now + datetime.timedelta(minutes=30)
    return start.strftime("%H:%M"), end.strftime("%H:%M")


def test_a_request_opened_before_quiet_hours_neither_pings_nor_realerts_during_them(admin, make_user, push):
    relay = RelayServer(**push.env, REALERT_SECONDS="5")
    quiet = Owner(admin, make_user, push, tokens=[hex_token()])
    control = Owner(admin, make_user, push, tokens=[hex_token()])
    phones = []
    try:
        # Both requests open while no phone is connected and no window is set: each gets
        # its wake push at once.
        opened = {}
        for owner in (quiet, control):
            status, headers, body = open_async(relay.base, owner.agent, 300)
            assert status == 202, body
            opened[owner] = headers["location"]
        assert wait_for(lambda: push.apns_for(quiet.tokens) and push.apns_for(control.tokens), 10), "the wake pushes"

        # Quiet hours begin (set as the person would, straight into their table).
        start, end = window_around_now()
        admin.execute("insert into public.quiet_hours (user_id, days, start_time, end_time, time_zone)"
                      " values (%s, '{1,2,3,4,5,6,7}', %s, %s, 'UTC')", (quiet.user, start, end))

        # Each person's phone connects now.
        quiet_phone = Phone(relay.base, quiet.phone, answer=False)
        phones.append(quiet_phone)
        control_phone = Phone(relay.base, control.phone, answer=False)
        phones.append(control_phone)

        # The control is pinged on hello and re-alerted once.
        assert wait_for(lambda: control_phone.kinds("locate"), 10), "the control's phone is pinged"
        assert wait_for(lambda: len(push.apns_for(control.tokens)) == 2, 15), "the control is re-alerted"
        # Past the re-alert's moment and two backstop polls (every 5 s) later, the phone in
        # quiet hours still has no ping and the person had no re-alert.
        time.sleep(11)
        assert quiet_phone.kinds("locate") == [], "no ping during quiet hours"
        assert len(push.apns_for(quiet.tokens)) == 1, "no re-alert during quiet hours"
        # The request was not refused: it still waits.
        status, _, body = curl("GET", relay.base + opened[quiet], quiet.agent)
        assert status == 202, body

        # The window is lifted: the waiting request reaches the phone (the backstop poll).
        admin.execute("delete from public.quiet_hours where user_id = %s", (quiet.user,))
        assert wait_for(lambda: quiet_phone.kinds("locate"), 15), "pinged once quiet hours are over"
    finally:
        for phone in phones:
            phone.stop()
        relay.stop()
