"""One account's hello never breaks other users' hellos (docs/security.md, "One account
never degrades another").

An attacker with a valid account fills its device cap through the API (RLS allows it), then
says hello with new device ids at the same moment as other users' phones, on two relay
instances. Before the fix every such hello raised 54000 inside relay.device_hellos, which
aborted the whole batch, and the relay closed every socket of the batch with 1011 "try
again" — other users' sockets included (20 of 24 victims' hellos failed). Clients are
Python `websockets` and psycopg against real `whereabot serve` processes.
"""
import asyncio
import json
import threading
import time
import uuid

import psycopg
import pytest
import websockets

from conftest import ADMIN_URL, through_the_api
from relay_server import RelayServer
from test_hostile import phone_token, user

VICTIMS = 24
ATTACKER_SOCKETS = 8  # 4 per instance: under the 5 sockets an account may have waiting for their hello


@pytest.fixture
def two_relays():
    servers = [RelayServer(), RelayServer()]
    yield servers
    for server in servers:
        if server.process.poll() is None:
            server.stop()


def fill_devices_through_the_api(admin, who, count):
    """Inserts `count` devices as the user's own session would through Supabase's API."""
    with through_the_api(admin, who):
        for n in range(count):
            admin.execute("insert into public.devices (id, user_id, name, platform) values (%s, %s, %s, 'android')",
                          (uuid.uuid4(), who[0], f"Filler {n}"))


async def hello_and_watch(base, credential, source, watch=3.0):
    """Opens a socket from `source`, says hello with a new device id; (close code, reason)
    or None if still open."""
    ws = await websockets.connect(base.replace("http", "ws") + "/v1/device", local_addr=(source, 0),
                                  additional_headers={"Authorization": f"Bearer {credential}"})
    await ws.send(json.dumps({"type": "hello", "device_id": str(uuid.uuid4()), "device_name": "Phone",
                              "platform": "android", "app_version": "1"}))
    try:
        await asyncio.wait_for(ws.wait_closed(), watch)
        return ws.close_code, ws.close_reason
    except asyncio.TimeoutError:
        await ws.close()
        return None


def test_an_account_at_its_device_cap_never_fails_other_users_hellos(two_relays, admin):
    mallory = user(admin, "Mallory")
    victims = [user(admin, f"Victim {n}") for n in range(VICTIMS)]
    fill_devices_through_the_api(admin, mallory, 50)
    attacker = phone_token(mallory)

    async def storm():
        # Mallory's hellos and the victims' arrive together, on both instances, each phone
        # from an address of its own (as phones on the internet are).
        tasks = []
        for n in range(ATTACKER_SOCKETS):
            tasks.append(hello_and_watch(two_relays[n % 2].base, attacker, f"127.0.2.{n + 1}"))
        for n, victim in enumerate(victims):
            tasks.append(hello_and_watch(two_relays[n % 2].base, phone_token(victim), f"127.0.3.{n + 1}"))
        return await asyncio.gather(*tasks)

    outcomes = asyncio.run(storm())
    attackers, victims_seen = outcomes[:ATTACKER_SOCKETS], outcomes[ATTACKER_SOCKETS:]
    ok = sum(1 for outcome in victims_seen if outcome is None)
    print(f"victims' hellos that succeeded beside the attacker's: {ok} of {VICTIMS}")
    assert victims_seen == [None] * VICTIMS, "every victim's socket stays open after its hello"
    assert attackers == [(4002, "too_many_devices")] * ATTACKER_SOCKETS, \
        "the attacker's new devices past the cap are refused, each alone, with 4002"
    for server in two_relays:
        assert server.process.poll() is None


def test_revocation_checks_and_hello_batches_never_deadlock(relay_connect, admin):
    """The heartbeat's relay.revoked_connections and hello batches that replace sockets of
    the same devices take row locks in one order. Before: they locked rows in opposite
    orders and an unlucky pair failed with 40P01 (a hello batch refused as a whole)."""
    instance = "deadlock-" + uuid.uuid4().hex[:6]
    setup = relay_connect()
    setup.execute("select relay.register_instance(%s)", (instance,))
    devices = 40
    people = [user(admin, f"Owner {n}") for n in range(devices)]
    device_ids = [uuid.uuid4() for _ in range(devices)]
    errors, stop = [], threading.Event()

    def hello(n, session):
        return {"connection": str(uuid.uuid4()), "user": str(people[n][0]), "session": str(session),
                "device": str(device_ids[n]), "name": "Phone", "platform": "ios", "app_version": "1",
                "opened_at": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime()) + f".{time.time_ns() % 10**9:09d}Z"}

    def revoke_sessions():
        """Ends every owner's session and gives each a new one, so the old sockets are revoked."""
        fresh = [uuid.uuid4() for _ in people]
        with psycopg.connect(ADMIN_URL, autocommit=True) as conn:
            for person, session in zip(people, fresh):
                conn.execute("insert into auth.sessions (id, user_id, created_at) values (%s, %s, now())",
                             (session, person[0]))
            conn.execute("delete from auth.sessions where id = any(%s)", ([p[1] for p in people],))
        return fresh

    # Register one socket per device with the original sessions, then revoke those sessions.
    setup.execute("select relay.device_hellos(%s, %s::jsonb)",
                  (instance, json.dumps([hello(n, people[n][1]) for n in range(devices)])))
    sessions = revoke_sessions()

    def hellos_in_reverse():
        conn = relay_connect()
        while not stop.is_set():
            batch = [hello(n, sessions[n]) for n in reversed(range(devices))]
            try:
                conn.execute("select relay.device_hellos(%s, %s::jsonb)", (instance, json.dumps(batch)))
            except psycopg.Error as error:
                errors.append(error.sqlstate)

    def revocation_checks():
        conn = relay_connect()
        while not stop.is_set():
            try:
                conn.execute("select count(*) from relay.revoked_connections(%s)", (instance,))
            except psycopg.Error as error:
                errors.append(error.sqlstate)

    def stale_sockets():
        """Keeps re-adding sockets of the revoked sessions, so both sides touch the same devices
        (under the locks every hello batch holds, in its order: the instance's row for key
        share, then the devices' hello locks, sorted). Its errors count as the others' do:
        with the devices' locks taken before the instance's row it once deadlocked against
        a hello batch and a revocation check queued for that row."""
        with psycopg.connect(ADMIN_URL, autocommit=True) as conn:
            while not stop.is_set():
                try:
                    add_stale_sockets(conn)
                except psycopg.Error as error:
                    errors.append(error.sqlstate)

    def add_stale_sockets(conn):
        with conn.transaction():
            conn.execute("select from relay.instances where id = %s for key share", (instance,))
            conn.execute("select pg_advisory_xact_lock(k) from (select distinct"
                         " hashtextextended('whereabot_device_hello:' || d::text, 0) k"
                         " from unnest(%s::uuid[]) d order by 1) x", (device_ids,))
            conn.execute(
                "insert into relay.connections (id, instance_id, user_id, device_id, platform, session_id,"
                " opened_at) select gen_random_uuid(), %s, u, d, 'ios', gen_random_uuid(),"
                " now() - interval '1 hour' from unnest(%s::uuid[], %s::uuid[]) x(u, d)",
                (instance, [p[0] for p in people], device_ids))

    threads = [threading.Thread(target=f) for f in (hellos_in_reverse, hellos_in_reverse, revocation_checks,
                                                     revocation_checks, stale_sockets)]
    for thread in threads:
        thread.start()
    time.sleep(6)
    stop.set()
    for thread in threads:
        thread.join()
    assert "40P01" not in errors, f"{errors.count('40P01')} deadlocks"
    assert errors == [], errors


async def open_silent(base, credential, source="127.0.0.1"):
    """A phone socket that never says hello; the status of a refused upgrade, or the socket."""
    try:
        return await websockets.connect(base.replace("http", "ws") + "/v1/device",
                                        additional_headers={"Authorization": f"Bearer {credential}"},
                                        local_addr=(source, 0))
    except websockets.exceptions.InvalidStatus as refused:
        return refused.response.status_code


def test_sockets_waiting_for_hello_are_bounded_per_account_not_per_address(two_relays, admin):
    """Before: one token opened 300 sockets without hello, each holding a slot for 10 s and
    costing a session check. Now the bound is the account's (and
    the relay's), never the address's — customers behind one NAT or balancer are not refused
    for sharing it."""
    relay = two_relays[0]
    mallory, others = user(admin, "Mallory"), [user(admin, f"Other {n}") for n in range(3)]

    async def scenario():
        opened = [await open_silent(relay.base, phone_token(mallory)) for _ in range(5)]
        assert all(not isinstance(ws, int) for ws in opened), "five sockets of one account may wait for their hello"
        assert await open_silent(relay.base, phone_token(mallory)) == 429, "the sixth is refused before the upgrade"
        # Said hello: its place is free again, and the account may open one more.
        await opened[0].send(json.dumps({"type": "hello", "device_id": str(uuid.uuid4()), "device_name": "Phone",
                                         "platform": "android", "app_version": "1"}))
        await asyncio.sleep(0.3)
        extra = await open_silent(relay.base, phone_token(mallory))
        assert not isinstance(extra, int), "a socket that said hello no longer counts"
        # Other accounts' sockets from the same address are their own accounts' business.
        more = [await open_silent(relay.base, phone_token(other)) for other in others[:2] for _ in range(5)]
        assert all(not isinstance(ws, int) for ws in more), "fifteen sockets wait from one address: no address bound"
        assert await open_silent(relay.base, phone_token(others[1])) == 429, "each account keeps its own bound"
        # The other instance keeps its own count.
        assert not isinstance(await open_silent(two_relays[1].base, phone_token(mallory)), int)
        for ws in opened[1:] + more:
            await ws.close()
        await asyncio.sleep(0.3)
        assert not isinstance(await open_silent(relay.base, phone_token(others[2])), int), "closed sockets free their places"

    asyncio.run(scenario())
