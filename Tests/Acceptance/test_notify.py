"""Every relay function's NOTIFY reaches another session only after commit, with the
documented payload, on the channels of exactly the instances concerned (addressed
notifications: migration 20261130140000). Two real sessions: one LISTENs on the channels
of three instances and the broadcast ones, the other calls the function."""
import base64
import json
import uuid

import pytest

from relay_server import instance_channel as channel

INSTANCES = ["relay-a", "relay-b", "relay-c"]
BROADCAST = ["whereabot_device", "whereabot_key", "whereabot_replay"]
REPLY_KEY = bytes(range(32))


NAMES = {channel(instance): instance for instance in INSTANCES}


def drain(conn, timeout):
    """The notifications that arrive on `conn` within `timeout` seconds, as (instance or
    broadcast channel, payload)."""
    return [(NAMES.get(n.channel, n.channel), json.loads(n.payload)) for n in conn.notifies(timeout=timeout)]


@pytest.fixture
def bus(relay_connect):
    """A listener on every channel and a second session whose transactions we control."""
    listener = relay_connect()
    for instance in INSTANCES:  # a hello never creates its instance's row; a heartbeat does
        listener.execute("select relay.heartbeat(%s)", (instance,))
    for name in [channel(instance) for instance in INSTANCES] + BROADCAST:
        listener.execute(f'listen "{name}"')
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


def hello(conn, owner, session, instance, device=None, connection=None):
    """One socket's hello through relay.device_hellos: {status, pending locate messages}."""
    result = conn.execute(
        "select relay.device_hellos(%s, jsonb_build_array(jsonb_build_object('connection', %s::uuid, 'user', %s::uuid,"
        " 'session', %s::uuid, 'device', %s::uuid, 'name', 'Phone', 'platform', 'ios', 'app_version', '1.0',"
        " 'opened_at', now())))",
        (instance, connection or uuid.uuid4(), owner, session, device or uuid.uuid4())).fetchone()[0]
    return {"status": result["results"][0]["status"], "pending": [p["message"] for p in result["pending"]]}


def expires_ms(conn, request_id):
    return conn.execute(
        "select (extract(epoch from expires_at) * 1000)::bigint from relay.pending_requests where id = %s",
        (request_id,)).fetchone()[0]


def ping(admin, request_id, owner, requester=None):
    """The locate message as its holders get it (with owner and reply key; no reason given
    here; the owner always allows no agent, so the relay's decision is to ask)."""
    return {"type": "locate", "id": str(request_id), "owner": str(owner), "client_id": "client-1",
            "agent_name": "Claude", "expires_ms": expires_ms(admin, request_id), "requester": requester,
            "reply_key": base64.b64encode(REPLY_KEY).decode(), "reason": None, "always_allow": None}


def test_open_request_without_sockets_notifies_nobody(bus, make_user):
    result, notes = after_commit(bus, lambda c: open_request(c, uuid.uuid4(), make_user()))
    assert result == {"status": "opened", "connections": 0, "ping": None}
    assert notes == []


def test_open_request_notifies_only_the_holders_and_returns_the_callers_ping(bus, make_user, admin, relay_connect):
    owner, session, _ = make_user(with_session=True)
    other, other_session, _ = make_user(with_session=True)
    setup = relay_connect()
    hello(setup, owner, session, "relay-a")
    hello(setup, owner, session, "relay-b")
    hello(setup, other, other_session, "relay-c")  # another user's phone: relay-c hears nothing
    drain(bus[0], 0.3)
    request_id = uuid.uuid4()
    result, notes = after_commit(bus, lambda c: open_request(c, request_id, owner, instance="relay-a"))
    expected = ping(admin, request_id, owner)
    assert result == {"status": "opened", "connections": 2, "ping": expected}
    assert notes == [("relay-b", {**expected, "kind": "locate"})]


def test_shared_open_request_carries_the_requester(bus, make_user, admin, relay_connect):
    owner, session, _ = make_user("Ada", with_session=True)
    viewer = make_user("Bob", "bob-" + uuid.uuid4().hex[:6] + "@test.example")
    admin.execute("insert into public.location_shares (owner_id, viewer_id) values (%s, %s)", (owner, viewer))
    hello(relay_connect(), owner, session, "relay-b")
    drain(bus[0], 0.3)
    request_id = uuid.uuid4()
    _, notes = after_commit(bus, lambda c: open_request(c, request_id, owner, requester=viewer))
    email = admin.execute("select email from auth.users where id = %s", (viewer,)).fetchone()[0]
    assert notes == [("relay-b", {**ping(admin, request_id, owner, {"user_id": str(viewer), "name": "Bob", "email": email}),
                                  "kind": "locate"})]


def test_rolled_back_open_request_notifies_nothing(bus, make_user):
    listener, actor = bus
    open_request(actor, uuid.uuid4(), make_user())
    actor.rollback()
    assert drain(listener, 0.5) == []


def test_device_hello_notifies_only_when_it_replaces_a_socket(bus, make_user):
    (owner, session, _), device, first, second = make_user(with_session=True), uuid.uuid4(), uuid.uuid4(), uuid.uuid4()
    result, notes = after_commit(bus, lambda c: hello(c, owner, session, "relay-a", device, first))
    assert result == {"status": "ok", "pending": []}
    assert notes == []  # no older socket of the device anywhere: nobody to tell
    result, notes = after_commit(bus, lambda c: hello(c, owner, session, "relay-b", device, second))
    assert result == {"status": "ok", "pending": []}
    assert notes == [("whereabot_device", {
        "device": str(device), "owner": str(owner), "event": "hello", "instance": "relay-b", "connection": str(second)})]


def test_device_hello_returns_pending_pings_with_their_reply_key(make_user, admin, relay_connect):
    owner, session, _ = make_user(with_session=True)
    conn, request_id = relay_connect(), uuid.uuid4()
    open_request(conn, request_id, owner)
    assert hello(conn, owner, session, "relay-b") == {"status": "ok", "pending": [ping(admin, request_id, owner)]}


def settle_setup(bus, make_user, relay_connect, holders, waiter="relay-a"):
    (owner, session, _), device, request_id = make_user(with_session=True), uuid.uuid4(), uuid.uuid4()
    setup = relay_connect()
    for index, instance in enumerate(holders):
        hello(setup, owner, session, instance, device if index == 0 else None)
    open_request(setup, request_id, owner, instance=waiter)
    drain(bus[0], 0.3)
    return owner, device, request_id


def settle(conn, request_id, owner, device, instance=None):
    return conn.execute("select relay.settle(%s, %s, %s, 'location', null, 'c2VhbGVk', %s)",
                        (request_id, owner, device, instance)).fetchone()[0]


def answer(request_id, owner, cancel):
    return {"kind": "answer", "id": str(request_id), "waiter": "relay-a", "owner": str(owner), "outcome": "location",
            "reason": None, "sealed": "c2VhbGVk", "cancel": cancel}


def cancel(request_id, owner):
    return {"kind": "cancel", "id": str(request_id), "owner": str(owner)}


def test_settle_sends_the_answer_to_the_waiter_and_the_cancel_to_the_holders(bus, make_user, relay_connect, admin):
    owner, device, request_id = settle_setup(bus, make_user, relay_connect, ["relay-b", "relay-c"])
    result, notes = after_commit(bus, lambda c: settle(c, request_id, owner, device))
    assert result == "settled"
    assert sorted(notes, key=lambda n: n[0]) == [("relay-a", answer(request_id, owner, False)),
                                                 ("relay-b", cancel(request_id, owner)),
                                                 ("relay-c", cancel(request_id, owner))]
    assert admin.execute("select delivered_at is not null from relay.pending_requests where id = %s",
                         (request_id,)).fetchone()[0]


def test_settle_folds_the_cancel_into_the_answer_and_skips_the_caller(bus, make_user, relay_connect):
    owner, device, request_id = settle_setup(bus, make_user, relay_connect, ["relay-a", "relay-b"])
    result, notes = after_commit(bus, lambda c: settle(c, request_id, owner, device, instance="relay-b"))
    assert result == "settled"
    assert notes == [("relay-a", answer(request_id, owner, True))]


def test_settle_by_the_waiter_notifies_only_the_other_holders(bus, make_user, relay_connect):
    owner, device, request_id = settle_setup(bus, make_user, relay_connect, ["relay-a", "relay-c"])
    result, notes = after_commit(bus, lambda c: settle(c, request_id, owner, device, instance="relay-a"))
    assert result == "settled"
    assert notes == [("relay-c", cancel(request_id, owner))]


def test_finish_notifies_cancel_to_the_holders(bus, make_user, relay_connect):
    owner, _, request_id = settle_setup(bus, make_user, relay_connect, ["relay-a", "relay-b"])
    result, notes = after_commit(bus, lambda c: c.execute(
        "select relay.finish(%s, 'relay-a', 'abandoned')", (request_id,)).fetchone()[0])
    assert result["status"] == "finished"
    assert sorted(notes, key=lambda n: n[0]) == [("relay-a", cancel(request_id, owner)), ("relay-b", cancel(request_id, owner))]


def test_reap_notifies_cancel_for_a_dead_waiter(bus, make_user, relay_connect, admin):
    (owner, session, _), request_id = make_user(with_session=True), uuid.uuid4()
    instance = "dead-" + uuid.uuid4().hex[:8]
    conn = relay_connect()
    conn.execute("select relay.register_instance(%s)", (instance,))
    hello(conn, owner, session, "relay-c")
    open_request(conn, request_id, owner, instance=instance)
    admin.execute("update relay.instances set heartbeat_at = now() - interval '1 hour' where id = %s", (instance,))
    drain(bus[0], 0.3)
    result, notes = after_commit(bus, lambda c: c.execute("select relay.reap()").fetchone()[0])
    assert result["abandoned"] >= 1
    assert ("relay-c", cancel(request_id, owner)) in notes


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
    assert drain(listener, 1.0) == [("whereabot_device", {"device": str(device), "owner": str(owner), "event": "revoked",
                                                           "instance": None})]


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
