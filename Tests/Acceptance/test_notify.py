"""Every relay function's NOTIFY reaches another session only after commit, with the
documented payload (SPEC §4). Two real sessions: one LISTENs, the other calls the function."""
import json
import uuid

import pytest

CHANNELS = ["whereabot_locate", "whereabot_answer", "whereabot_cancel", "whereabot_device", "whereabot_key"]
REPLY_KEY = bytes(range(32))


def drain(conn, timeout):
    """The notifications that arrive on `conn` within `timeout` seconds, as (channel, payload)."""
    return [(n.channel, json.loads(n.payload)) for n in conn.notifies(timeout=timeout)]


@pytest.fixture
def bus(relay_connect):
    """A listener on every channel and a second session whose transactions we control."""
    listener = relay_connect()
    for channel in CHANNELS:
        listener.execute(f"listen {channel}")
    actor = relay_connect(autocommit=False)
    return listener, actor


def after_commit(bus, action):
    """Runs `action(actor)` in a transaction; asserts nothing arrives before the commit and
    returns what arrives after it."""
    listener, actor = bus
    result = action(actor)
    assert drain(listener, 0.3) == [], "a notification arrived before commit"
    actor.commit()
    return result, drain(listener, 1.0)


def open_request(conn, request_id, owner, requester=None, instance="relay-a", seconds=60):
    return conn.execute(
        "select relay.open_request(%s, %s, %s, 'client-1', 'Claude', %s, %s,"
        " now() + make_interval(secs => %s))",
        (request_id, owner, requester, instance, REPLY_KEY, seconds)).fetchone()[0]


def expires_ms(conn, request_id):
    return conn.execute(
        "select (extract(epoch from expires_at) * 1000)::bigint from relay.pending_requests where id = %s",
        (request_id,)).fetchone()[0]


def test_open_request_notifies_locate(bus, make_user, admin):
    owner = make_user()
    request_id = uuid.uuid4()
    result, notes = after_commit(bus, lambda c: open_request(c, request_id, owner))
    assert result == {"status": "opened", "connections": 0}
    assert notes == [("whereabot_locate", {
        "id": str(request_id), "owner": str(owner), "client_id": "client-1", "agent_name": "Claude",
        "expires_ms": expires_ms(admin, request_id), "requester": None})]


def test_shared_open_request_carries_the_requester(bus, make_user, admin):
    owner, viewer = make_user("Ada"), make_user("Bob", "bob-" + uuid.uuid4().hex[:6] + "@test.example")
    admin.execute("insert into public.location_shares (owner_id, viewer_id) values (%s, %s)", (owner, viewer))
    request_id = uuid.uuid4()
    _, notes = after_commit(bus, lambda c: open_request(c, request_id, owner, requester=viewer))
    email = admin.execute("select email from auth.users where id = %s", (viewer,)).fetchone()[0]
    assert notes == [("whereabot_locate", {
        "id": str(request_id), "owner": str(owner), "client_id": "client-1", "agent_name": "Claude",
        "expires_ms": expires_ms(admin, request_id),
        "requester": {"user_id": str(viewer), "name": "Bob", "email": email}})]


def test_rolled_back_open_request_notifies_nothing(bus, make_user):
    listener, actor = bus
    open_request(actor, uuid.uuid4(), make_user())
    actor.rollback()
    assert drain(listener, 0.5) == []


def test_device_hello_notifies_device(bus, make_user):
    (owner, session, _), device, connection = make_user(with_session=True), uuid.uuid4(), uuid.uuid4()
    result, notes = after_commit(bus, lambda c: c.execute(
        "select relay.device_hello('relay-b', %s, %s, %s, %s, 'Phone', 'ios', '1.0', now())",
        (connection, owner, session, device)).fetchone()[0])
    assert result == {"status": "ok", "pending": []}
    assert notes == [("whereabot_device", {
        "device": str(device), "event": "hello", "instance": "relay-b", "connection": str(connection)})]


def test_settle_notifies_answer_then_cancel(bus, make_user, relay_connect):
    (owner, session, _), device, request_id = make_user(with_session=True), uuid.uuid4(), uuid.uuid4()
    setup = relay_connect()
    setup.execute("select relay.device_hello('relay-b', %s, %s, %s, %s, 'Phone', 'ios', '1.0', now())",
                  (uuid.uuid4(), owner, session, device))
    open_request(setup, request_id, owner, instance="relay-a")
    drain(bus[0], 0.3)
    result, notes = after_commit(bus, lambda c: c.execute(
        "select relay.settle(%s, %s, %s, 'location', null, 'c2VhbGVk')",
        (request_id, owner, device)).fetchone()[0])
    assert result == "settled"
    assert notes == [
        ("whereabot_answer", {"id": str(request_id), "waiter": "relay-a", "outcome": "location",
                              "reason": None, "sealed": "c2VhbGVk"}),
        ("whereabot_cancel", {"id": str(request_id), "owner": str(owner)}),
    ]


def test_finish_notifies_cancel(bus, make_user, relay_connect):
    owner, request_id = make_user(), uuid.uuid4()
    open_request(relay_connect(), request_id, owner, instance="relay-a")
    drain(bus[0], 0.3)
    result, notes = after_commit(bus, lambda c: c.execute(
        "select relay.finish(%s, 'relay-a', 'abandoned')", (request_id,)).fetchone()[0])
    assert result["status"] == "finished"
    assert notes == [("whereabot_cancel", {"id": str(request_id), "owner": str(owner)})]


def test_reap_notifies_cancel_for_a_dead_waiter(bus, make_user, relay_connect, admin):
    owner, request_id = make_user(), uuid.uuid4()
    instance = "dead-" + uuid.uuid4().hex[:8]
    open_request(relay_connect(), request_id, owner, instance=instance)
    admin.execute("update relay.instances set heartbeat_at = now() - interval '1 hour' where id = %s", (instance,))
    drain(bus[0], 0.3)
    result, notes = after_commit(bus, lambda c: c.execute("select relay.reap()").fetchone()[0])
    assert result["abandoned"] >= 1
    assert ("whereabot_cancel", {"id": str(request_id), "owner": str(owner)}) in notes


def as_user_session(conn, user_id):
    """Acts as PostgREST does for the user's own session token."""
    conn.execute("set local role authenticated")
    conn.execute("select set_config('request.jwt.claims', %s, true)",
                 (json.dumps({"sub": str(user_id), "role": "authenticated"}),))


def test_device_removal_notifies_device(bus, make_user, admin):
    owner, device = make_user(), uuid.uuid4()
    admin.execute("insert into public.devices (id, user_id, platform) values (%s, %s, 'android')", (device, owner))
    listener, _ = bus
    with admin.transaction():
        as_user_session(admin, owner)
        admin.execute("update public.devices set revoked_at = now() where id = %s", (device,))
        assert drain(listener, 0.3) == []
    assert drain(listener, 1.0) == [("whereabot_device", {"device": str(device), "event": "revoked", "instance": None})]


def test_agent_key_revocation_notifies_key(bus, make_user, admin):
    owner = make_user()
    listener, _ = bus
    with admin.transaction():
        as_user_session(admin, owner)
        admin.execute("select public.create_agent_key('ci')")
        key_id = admin.execute("select id from public.agent_keys").fetchone()[0]
    with admin.transaction():
        as_user_session(admin, owner)
        assert admin.execute("select public.revoke_agent_key(%s)", (key_id,)).fetchone()[0] is True
        assert drain(listener, 0.3) == []
    assert drain(listener, 1.0) == [("whereabot_key", {"key_id": str(key_id)})]
