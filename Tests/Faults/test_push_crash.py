"""P12 (docs/testing.md, "What make test runs"): a Postgres crash between the silent push and
the checking time. The UNLOGGED request rows vanish with their push claims; the waiting relay
re-creates the rows, restores its wake claim without sending it again, and sends the checking
stage: still one silent and one checking push per APNs token, one checking Web Push per
subscription."""
import pathlib
import sys
import time
import uuid

import psycopg
import pytest

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "Acceptance"))
from faultkit import Postgres, Relay, wait_until  # noqa: E402
from push_kit import Locate, Push, hex_token, wait_for  # noqa: E402

OWNERS = 3


@pytest.fixture(scope="module")
def setup():
    postgres = Postgres()
    postgres.start()
    fakes = Push()
    relay = Relay("fault-push-relay", postgres.relay_url, **fakes.env)
    relay.start()
    yield postgres, fakes, relay
    relay.stop()
    fakes.stop()
    postgres.stop()


def test_p12_postgres_crash_between_silent_push_and_checking(setup):
    postgres, fakes, relay = setup
    owners = []
    with psycopg.connect(postgres.admin_url, autocommit=True) as conn:
        for user, _phone_token, agent_token in postgres.make_users(OWNERS):
            device = uuid.uuid4()
            conn.execute("insert into public.devices (id, user_id, name, platform) values (%s, %s, 'iPhone', 'ios')",
                         (device, user))
            tokens = [hex_token(), hex_token()]
            for value in tokens:
                conn.execute("insert into public.push_tokens (token, user_id, device_id) values (%s, %s, %s)",
                             (value, user, device))
            path = f"/sub/{user.hex[:8]}"
            endpoint, p256dh, auth = fakes.web.subscribe(path)
            conn.execute("insert into public.web_push_subscriptions (endpoint, p256dh, auth, user_id, device_id)"
                         " values (%s, %s, %s, %s, %s)", (endpoint, p256dh, auth, user, device))
            conn.execute("insert into public.always_allowed_agents (user_id, client_id, client_name)"
                         " values (%s, 'fault-agent', 'Fault agent')", (user,))
            owners.append((tokens, path, agent_token))
    all_tokens = [t for tokens, _, _ in owners for t in tokens]
    calls = [Locate(relay.base, agent, 25).begin() for _, _, agent in owners]
    assert wait_for(lambda: len(fakes.apns_for(all_tokens)) == len(all_tokens), 5), "silent pushes at wake"
    crashed_at = time.time()
    postgres.restart("immediate", down_for=2.0)
    print(f"Postgres crashed {crashed_at - calls[0].started:.1f} s after the first call, back after "
          f"{time.time() - crashed_at:.1f} s")
    wait_until(lambda: len(fakes.apns_for(all_tokens)) >= 2 * len(all_tokens), 20, "the checking alerts")
    time.sleep(1)
    for tokens, path, _ in owners:
        pushes = fakes.apns_for(tokens)
        kinds = sorted((p["token"], p["headers"]["apns-push-type"]) for p in pushes)
        assert kinds == sorted([(t, "background") for t in tokens] + [(t, "alert") for t in tokens]), kinds
        assert all(p["status"] == 200 for p in pushes)
        web = fakes.web_for([path])
        assert [w["payload"]["kind"] for w in web] == ["checking"], web
    for call in calls:
        call.join()
    assert [c.status for c in calls] == [503] * OWNERS
    print(f"pushes seen by the fake APNs: {len(fakes.apns_for(all_tokens))} for {len(all_tokens)} tokens; "
          f"Web Push: {len(fakes.web.pushes)} for {OWNERS} subscriptions")
