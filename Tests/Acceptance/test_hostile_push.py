"""Pushes cannot be amplified, and a flood delays nobody else's push (docs/protocol.md,
"Budgets").

An account with ten Web Push subscriptions and ten APNs tokens loops "locate, hang up after
150 ms" from 5 threads against two relay instances: no phone is connected, so each request's
wake push goes out at once and the hang-up frees the waiting slot. Before: 333 locates sent
11,719 pushes in 10 s (~1,170/s) and filled the push queue that every user shares. Now each
target gets at most 30 pushes an hour and the account at most its budget (100), and a quiet
account's push, asked in the middle of the flood, goes out as if nothing happened. Fakes of
APNs and of a push service (Tests/Acceptance/fake_*.py) check every push strictly.
"""
import fcntl
import socket
import threading
import time
import urllib.request
import uuid

import pytest

from push_accounts import Owner, push  # noqa: F401,F811 (push is a fixture)
from push_kit import Locate, hex_token, wait_for
from relay_server import RelayServer, token

FLOOD_SECONDS = 10
F_SETPIPE_SZ = 1031  # fcntl.F_SETPIPE_SZ (Linux), spelled out for Python 3.11
PER_TARGET, PER_ACCOUNT = 30, 100


@pytest.fixture
def two_relays(push):
    servers = [RelayServer(**push.env), RelayServer(**push.env)]
    yield servers
    for server in servers:
        if server.process.poll() is None:
            server.stop()


def ask_and_hang_up(base, credential):
    """POST /v1/locate and close the connection 150 ms later, as the attacker's agent did."""
    host, port = base.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=2) as conn:
        conn.sendall((f"POST /v1/locate?timeout_secs=30 HTTP/1.1\r\nHost: {host}\r\n"
                      f"Authorization: Bearer {credential}\r\nContent-Length: 0\r\n\r\n").encode())
        time.sleep(0.15)


def flood_agents(bases, credential, threads, stop):
    """Starts `threads` agents that ask and hang up against `bases` in turn until `stop` is
    set; returns the threads and the count of locates asked so far (a one-element list)."""
    asked = [0]

    def agent(n):
        while not stop.is_set():
            ask_and_hang_up(bases[n % len(bases)], credential)
            asked[0] += 1

    started = [threading.Thread(target=agent, args=(n,)) for n in range(threads)]
    for thread in started:
        thread.start()
    return started, asked


def test_a_flooding_account_gets_its_budget_and_a_quiet_account_its_push_at_once(two_relays, push, admin, make_user):
    flooder = Owner(admin, make_user, push, tokens=[hex_token() for _ in range(10)],
                  paths=[f"/flood/{n}" for n in range(10)])
    quiet = Owner(admin, make_user, push, paths=["/quiet/0"])
    stop = threading.Event()
    started = time.time()
    threads, asked = flood_agents([server.base for server in two_relays], flooder.agent, 5, stop)
    time.sleep(FLOOD_SECONDS / 2)
    # The quiet account's agent asks in the middle of the flood, on either instance.
    quiet_locate = Locate(two_relays[1].base, quiet.agent, 5).begin()
    quiet_push = wait_for(lambda: push.web_for(["/quiet/0"]), 5)
    time.sleep(max(0, started + FLOOD_SECONDS - time.time()))
    stop.set()
    for thread in threads:
        thread.join()
    quiet_locate.join()
    time.sleep(1)  # pushes already claimed finish

    flood_web = push.web_for(flooder.paths)
    flood_apns = push.apns_for(flooder.tokens)
    sent = len(flood_web) + len(flood_apns)
    print(f"flooding account: {asked[0]} locates, {sent} pushes in {FLOOD_SECONDS} s "
          f"(its budget: {PER_ACCOUNT} an hour; before the fix ~1,170 a second)")
    assert asked[0] > 100, "the flood really ran"
    assert sent <= PER_ACCOUNT, "the account's hourly budget holds across both instances"
    for target in flooder.paths:
        assert len([p for p in flood_web if p["path"] == target]) <= PER_TARGET
    for target in flooder.tokens:
        assert len([p for p in flood_apns if p.get("token") == target]) <= PER_TARGET
    assert all(200 <= p["status"] < 300 for p in flood_web), "what was sent was well-formed"

    assert quiet_push, "the quiet account's push went out during the flood"
    delay = quiet_push[0]["time"] - quiet_locate.started
    print(f"quiet account's push {delay * 1000:.0f} ms after its locate")
    assert delay < 2, "at once (no phone connected), not after the flood's backlog"
    assert quiet_locate.status == 503
    for server in two_relays:
        assert server.process.poll() is None


def pending_requests(server):
    text = urllib.request.urlopen(server.base + "/metrics", timeout=5).read().decode()
    values = {line.split()[0]: float(line.split()[1]) for line in text.splitlines() if line and not line.startswith("#")}
    return values["whereabot_pending_requests"], values.get("whereabot_log_lines_dropped_total")


def test_a_log_reader_that_stops_reading_stalls_nothing(push, admin, make_user):
    """The relay's stderr is a pipe of one page that nobody reads: the flood's log lines
    (pushes, limits) fill it at once. Before, every thread that logged then blocked on the
    pipe, the hang-ups handled on those threads were lost, and the agents' slots stayed taken
    until their deadline (the flood test above failed that way now and then). Now lines go
    through a bounded buffer of their own: every ask is answered (a hang-up is not a refusal:
    the agent's asks join its one request, which stays open for the person), and the relay
    stops at once, waiting for no caller that left."""
    server = RelayServer(**push.env)
    fcntl.fcntl(server.process.stderr.fileno(), F_SETPIPE_SZ, 4096)
    flooder = Owner(admin, make_user, push, tokens=[hex_token() for _ in range(5)], paths=[f"/stuck/{n}" for n in range(5)])
    stop = threading.Event()
    threads, asked = flood_agents([server.base], flooder.agent, 6, stop)
    time.sleep(5)
    stop.set()
    for thread in threads:
        thread.join()
    assert asked[0] > 50, "the flood really ran"
    assert wait_for(lambda: pending_requests(server)[0] <= 1, 5), "the asks joined one request"
    dropped = pending_requests(server)[1]
    assert dropped is not None, "/metrics counts dropped log lines"
    print(f"{asked[0]} locates hung up; log lines dropped: {dropped:.0f}")
    assert server.stop() == 0, "stopped at once, with nothing waiting"


def test_a_viewer_asking_again_and_again_never_silences_the_owners_own_agent(push, admin, make_user):
    """Hostile input round 3: someone the owner shares with asks 40
    times and hangs up; their requests wake the owner's phone at most 30 times (their own
    budget), and the owner's own agent still wakes it afterwards. Before, the viewer spent the
    owner's budget and the owner's agents could not wake the phone for an hour. Since a
    hang-up is not a refusal, the viewer's agent's repeated asks join its one request: one
    push."""
    relay = RelayServer(**push.env)
    try:
        owner = Owner(admin, make_user, push, paths=["/shared-owner/0"])
        viewer = make_user(name="Vic Viewer", with_session=True)
        admin.execute("insert into public.location_shares (owner_id, viewer_id) values (%s, %s)", (owner.user, viewer[0]))
        viewer_agent = token(*viewer, client_id=str(uuid.uuid4()))
        host, port = relay.base.removeprefix("http://").split(":")
        for _ in range(40):
            with socket.create_connection((host, int(port)), timeout=2) as conn:
                conn.sendall((f"POST /v1/locate?timeout_secs=30&person=Grace%20Hopper HTTP/1.1\r\nHost: {host}\r\n"
                              f"Authorization: Bearer {viewer_agent}\r\nContent-Length: 0\r\n\r\n").encode())
                time.sleep(0.15)
        time.sleep(1)
        viewer_pushes = len(push.web_for(owner.paths))
        assert 1 <= viewer_pushes <= PER_TARGET, f"the viewer's requests woke the phone {viewer_pushes} times"
        own = Locate(relay.base, owner.agent, 5).begin()
        woke = wait_for(lambda: len(push.web_for(owner.paths)) > viewer_pushes, 5)
        own.join()
        assert woke, "the owner's own agent could not wake the phone after the viewer's 40 requests"
    finally:
        relay.stop()
