"""Fault tests (docs/architecture.md, "Several instances"): two relays behind HAProxy on their
own PostgreSQL. Each test prints sent / answered / lost and fails if any request is lost or
hangs."""
import concurrent.futures
import time

import pytest

from faultkit import (Agents, Haproxy, Phones, Postgres, Relay, fetch_durable, locate_once, open_durable, pending, report,
                      wait_until)

USERS = 25        # one phone each
PER_USER = 4      # under the cap of 5 waiting requests per user: 100 in flight
SENT = USERS * PER_USER


@pytest.fixture(scope="module")
def deployment():
    postgres = Postgres()
    postgres.start()
    relays = [Relay("fault-relay-1", postgres.relay_url), Relay("fault-relay-2", postgres.relay_url)]
    for relay in relays:
        relay.start()
    haproxy = Haproxy(relays)
    haproxy.start()
    yield postgres, relays, haproxy
    haproxy.stop()
    for relay in relays:
        relay.stop()
    postgres.stop()


def ws(base):
    return base.replace("http://", "ws://")


def in_flight(relays, phones):
    try:
        wait_until(lambda: pending(relays) >= SENT and phones.pings >= SENT, 30, f"{SENT} requests waiting and pinged")
    except AssertionError as timeout:
        # Say how far it got (it timed out here once, on a slowed machine).
        raise AssertionError(f"{timeout}: {pending(relays)} waiting, {phones.pings} pinged,"
                             f" {len(phones.connected)} phones connected") from None


def load(deployment, delay, first_url=None, agents_base=None):
    """USERS new users with one phone each (through HAProxy unless `first_url`), and SENT
    requests in flight and pinged (through HAProxy unless `agents_base`)."""
    postgres, relays, haproxy = deployment
    # Start from a healthy deployment: every relay ready, and HAProxy has had the two good
    # checks (rise 2, inter 1 s) it needs to send it traffic again after the last fault.
    wait_until(lambda: all(relay.ready() for relay in relays), 30, "every relay ready")
    time.sleep(2.5)
    users = postgres.make_users(USERS)
    phones = Phones(users, ws(haproxy.base), first_url=first_url, delay=delay)
    # Held until every request is waiting and pinged: answered `delay` after each ping, the
    # first came before the last ping on a slowed machine and "100 waiting" never held
    # ("0 waiting, 100 pinged").
    phones.hold()
    phones.start()
    agents = Agents(users, agents_base or haproxy.base, per_user=PER_USER)
    in_flight(relays, phones)
    phones.release()
    return phones, agents


def test_rolling_restart_behind_haproxy(deployment):
    """SIGTERM each instance in turn with 100 requests in flight; phones answer after 3 s."""
    postgres, relays, haproxy = deployment
    results, hung = [], 0
    for relay in relays:
        phones, agents = load(deployment, delay=3.0)
        relay.terminate()
        batch, stuck = agents.results(timeout=90)
        results += batch
        hung += stuck
        assert relay.wait(timeout=30) == 0, "a drained relay exits 0"
        phones.stop()
        relay.start()
    assert report("rolling restart", 2 * SENT, results, hung) == 0


def test_rolling_restart_with_durable_requests_waiting(deployment):
    """50 durable requests (Prefer: respond-async) waiting when each instance in turn is
    SIGTERMed and started again; phones answer 3 s after each ping. Every request is then
    fetched through HAProxy: 50 answered."""
    postgres, relays, haproxy = deployment
    wait_until(lambda: all(relay.ready() for relay in relays), 30, "every relay ready")
    time.sleep(2.5)
    users = postgres.make_users(25)
    phones = Phones(users, ws(haproxy.base), delay=3.0)
    phones.start()
    opened = [(agent, open_durable(haproxy.base, agent)) for _, _, agent in users for _ in range(2)]
    assert all(path for _, path in opened), "every durable request opened"
    for relay in relays:
        relay.terminate()
        assert relay.wait(timeout=30) == 0, "a drained relay exits 0"
        relay.start()
        wait_until(relay.ready, 20, "restarted relay ready")
    with concurrent.futures.ThreadPoolExecutor(max_workers=len(opened)) as pool:
        results = list(pool.map(lambda item: fetch_durable(haproxy.base, *item), opened))
    phones.stop()
    assert report("rolling restart, durable requests", len(opened), results, 0) == 0


def test_kill_9_of_the_instance_holding_the_phones(deployment):
    """Phones on relay 2, agents waiting on relay 1; relay 2 is killed. The phones reconnect
    through HAProxy and answer the pings they get again at hello."""
    postgres, relays, haproxy = deployment
    waiter, holder = relays
    phones, agents = load(deployment, delay=3.0, first_url=ws(holder.base), agents_base=waiter.base)
    holder.kill()
    results, hung = agents.results(timeout=90)
    phones.stop()
    holder.start()
    assert phones.reconnects >= USERS
    assert report("kill -9 of the phones' instance", SENT, results, hung) == 0


def test_postgres_fast_restart_mid_flight(deployment):
    """pg_ctl restart -m fast (stop, 5 s down, start) while 100 requests wait: the phones
    answer during the outage, the relays hold the answers and settle them afterwards.
    Meanwhile /readyz is 503, a new request gets 503 with Retry-After, and a waiter whose
    deadline falls in the outage is answered at its deadline."""
    postgres, relays, haproxy = deployment
    phones, agents = load(deployment, delay=3.0)
    before = phones.answers
    outage = {}

    def while_down():
        relay = relays[0]
        wait_until(lambda: not relay.ready(), 10, "/readyz 503 while Postgres is down")
        outage["new"] = locate_once(relay.base, extra[0][2], timeout_secs=5)
        outage["short"] = short.result(timeout=15)

    extra = postgres.make_users(2)
    short = concurrent.futures.ThreadPoolExecutor(max_workers=1).submit(locate_once, relays[0].base, extra[1][2], 2)
    time.sleep(0.3)  # the short request is open before the outage, its deadline falls in it
    postgres.restart("fast", down_for=5.0, during=while_down)
    during = phones.answers - before
    status, body, retry_after = outage["new"]
    print(f"during the outage: new request {status} {body!r} Retry-After {retry_after};"
          f" a waiter whose deadline fell in it got {outage['short'][0]}")
    assert status == 503 and retry_after and "Retry" in body
    assert outage["short"][0] in (503, 504), "a waiter keeps its deadline while Postgres is down"
    print(f"answers before the outage: {before}, during it: {during}")
    assert during > 0, "the outage must cover the phones' answers"
    results, hung = agents.results(timeout=90)
    phones.stop()
    wait_until(lambda: all(relay.ready() for relay in relays), 30, "relays ready again")
    assert phones.pings == SENT, "nobody is asked twice: answers given during the outage are held, not lost; " + phones.pinged_twice()
    assert report("pg_ctl restart -m fast", SENT, results, hung) == 0


def test_listener_connections_terminated(deployment):
    """pg_terminate_backend of each instance's LISTEN connection while the answers come. So
    that the answers surely land while the waiters are deaf, the relay role may not log in
    until they are all given (the pooled connections stay up): every sealed answer the
    waiters missed must come back as a replay."""
    postgres, relays, haproxy = deployment
    # The phones answer 3 s after their ping: under load the 100 requests take more than a
    # second to open, and with 1 s the first were answered before the last were asked, so
    # they were never all in flight at once. The answers
    # still land while the waiters are deaf: the relay role cannot log in until all came.
    phones, agents = load(deployment, delay=3.0)
    replayed_before = sum(relay.metric("whereabot_answers_replayed_total") for relay in relays)
    postgres.query("alter role whereabot_relay nologin")
    try:
        killed = postgres.query("select count(pg_terminate_backend(pid)) from pg_stat_activity"
                                " where application_name like %s", ('whereabot-fault-relay-%-listen',))[0][0]
        wait_until(lambda: phones.answers >= SENT, 20, "every phone's answer")
        time.sleep(1.0)  # the answers are settled (and their notifications gone) meanwhile
    finally:
        postgres.query("alter role whereabot_relay login")
    results, hung = agents.results(timeout=90)
    phones.stop()
    assert killed == 2
    assert all(relay.metric("whereabot_listener_reconnects_total") >= 1 for relay in relays)
    replayed = sum(relay.metric("whereabot_answers_replayed_total") for relay in relays) - replayed_before
    print(f"sealed answers replayed to waiters that missed them: {replayed:.0f}")
    assert replayed > 0
    assert report("LISTEN connections terminated", SENT, results, hung) == 0


def test_postgres_crash_empties_unlogged_tables(deployment):
    """pg_ctl stop -m immediate, 5 s down, start: relay.* tables are empty after recovery;
    the instances re-create their waiting requests and sockets, and every request is
    answered."""
    postgres, relays, haproxy = deployment
    phones, agents = load(deployment, delay=3.0)
    before = phones.answers
    postgres.restart("immediate", down_for=5.0)
    during = phones.answers - before
    print(f"answers before the crash: {before}, during the outage: {during}")
    assert during > 0, "the outage must cover the phones' answers"
    emptied = postgres.query("select count(*) from relay.pending_requests")[0][0]
    results, hung = agents.results(timeout=90)
    phones.stop()
    wait_until(lambda: all(relay.ready() for relay in relays), 30, "relays ready again")
    recreated = sum(relay.metric("whereabot_requests_recreated_total") for relay in relays)
    print(f"rows right after crash recovery: {emptied}; re-created by the relays: {recreated:.0f}")
    assert recreated >= SENT
    assert phones.pings == SENT, "nobody is asked twice: re-created requests are not pinged again; " + phones.pinged_twice()
    assert report("Postgres crash", SENT, results, hung) == 0
