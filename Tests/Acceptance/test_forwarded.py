"""Behind an HTTP proxy, limits count the client that X-Forwarded-For names (docs/deploy.md,
"Behind a load balancer: the client's address").

Debian's nginx and HAProxy in HTTP mode (`option forwardfor`) in front of a relay that trusts
them (TRUSTED_PROXIES=127.0.0.1). Every local client really is 127.0.0.1, which is trusted, so
a test stands for a client at a public address by sending the X-Forwarded-For an outer hop
would have added (198.51.100.7); the proxy appends 127.0.0.1 and the relay walks back to
198.51.100.7. test_hostile_proxy.py checks the same guarantees with the PROXY protocol.
Clients are `urllib` and Python `websockets`.
"""
import asyncio
import ipaddress
import json
import random
import re
import secrets
import time

import pytest

from front_proxy import Proxy
from relay_server import RelayServer
from test_hostile import agent_key, agent_token, connect_phone, http, locate_in_background, next_of, phone_token, user

STRANGER, CLIENT = "198.51.100.7", "198.51.100.8"
RATE_LIMITED = "Too many failed authentications from this address. Retry later."
NOT_CONNECTED = "The user's phone is not connected."
IGNORED = "whereabot_forwarded_headers_ignored_total"

def stopped(relay):
    if relay.process.poll() is None:
        relay.stop()


@pytest.fixture(params=["nginx", "haproxy"])
def proxy(request):
    """A relay trusting 127.0.0.1, behind nginx or HAProxy in HTTP mode."""
    relay = RelayServer(TRUSTED_PROXIES="127.0.0.1")
    try:
        front = Proxy(request.param, relay)
    except BaseException:
        stopped(relay)
        raise
    yield front
    front.stop()
    stopped(relay)


@pytest.fixture
def trusting_relay():
    """A relay trusting 127.0.0.1, reached directly (the test is its own balancer)."""
    relay = RelayServer(TRUSTED_PROXIES="127.0.0.1")
    yield relay
    stopped(relay)


@pytest.fixture(params=["", "10.0.0.0/8"], ids=["nobody-trusted", "others-trusted"])
def untrusting_relay(request):
    """A relay whose TRUSTED_PROXIES leaves out 127.0.0.1, reached directly."""
    relay = RelayServer(TRUSTED_PROXIES=request.param)
    yield relay
    stopped(relay)


def bad_key():
    """An agent key nobody has: it has the shape (AgentKey.looksLikeKey), so it costs a lookup."""
    return "wb_" + secrets.token_hex(32)


def forged_address():
    """A random IPv4 or IPv6 address, as a client would forge it."""
    if random.random() < 0.5:
        return str(ipaddress.IPv4Address(random.getrandbits(32)))
    return str(ipaddress.IPv6Address(random.getrandbits(128)))


def forwarded_node(address):
    """`address` as an RFC 7239 node (IPv6 bracketed and quoted)."""
    return f'"[{address}]"' if ":" in address else address


def locate(base, credential, headers):
    """(status, body, headers) of POST /v1/locate?timeout_secs=1 with these request headers."""
    return http(base, "POST", "/v1/locate?timeout_secs=1", credential, headers=headers, timeout=30)


def header(headers, name):
    """A response header by name (HAProxy writes header names in lower case)."""
    return {key.lower(): value for key, value in headers.items()}.get(name.lower())


def assert_limited(answers):
    """80 bad keys from one client: the first is 401, then it is over its budget (a burst of 20,
    2 a second back), and every refusal is the 429 with Retry-After."""
    statuses = [status for status, _, _ in answers]
    assert statuses[0] == 401 and set(statuses) <= {401, 429} and statuses.count(429) >= 20, \
        f"the stranger is limited: {statuses}"
    for status, body, headers in answers:
        if status == 429:
            assert body == RATE_LIMITED and int(header(headers, "Retry-After")) >= 1, (body, headers)


def assert_unaffected(base, admin, as_client):
    """The client whose request headers are `as_client` gets its normal answers: a valid agent
    key nobody used yet (a lookup) and a valid agent token are 503 (no phone), its own bad key 401."""
    owner = user(admin, "Agent Owner")
    for credential in (agent_key(admin, owner), agent_token(owner)):
        status, body, _ = locate(base, credential, as_client)
        assert status == 503 and body.startswith(NOT_CONNECTED), (status, body)
    assert locate(base, bad_key(), as_client)[0] == 401, "the client's own failure is its own: 401, not 429"


def ignored_headers(relay):
    """whereabot_forwarded_headers_ignored_total on the relay's /metrics (summed over any labels)."""
    status, text, _ = http(relay.base, "GET", "/metrics", timeout=10)
    assert status == 200
    values = re.findall(rf"^{IGNORED}(?:{{[^}}]*}})? (\S+)$", text, re.M)
    assert values, f"/metrics has {IGNORED}"
    return sum(int(float(value)) for value in values)


def test_a_strangers_failures_never_refuse_another_clients_valid_credential(proxy, admin):
    """Behind the proxy, a stranger's 80 bad keys get it 429 while another client's valid key and token still get their normal answer."""
    answers = [locate(proxy.base, bad_key(), {"X-Forwarded-For": STRANGER}) for _ in range(80)]
    assert_limited(answers)
    assert_unaffected(proxy.base, admin, {"X-Forwarded-For": CLIENT})


def test_a_forged_leftmost_address_changes_nothing(proxy, admin):
    """Behind the proxy, a stranger that puts a different forged address left of its own in every request is still limited as itself, and nothing is ignored."""
    before = ignored_headers(proxy.relay)
    answers = [locate(proxy.base, bad_key(), {"X-Forwarded-For": f"{forged_address()}, {STRANGER}"})
               for _ in range(80)]
    assert_limited(answers)
    assert_unaffected(proxy.base, admin, {"X-Forwarded-For": CLIENT})
    assert ignored_headers(proxy.relay) == before, "a well-formed chain is never ignored"


def test_a_phone_socket_and_a_locate_work_through_the_proxy(proxy, admin):
    """A phone's WebSocket through the proxy gets the ping of an agent's locate sent through the proxy, and its fix reaches the agent as a 200."""
    ada = user(admin)

    async def scenario():
        ws = await connect_phone(proxy, phone_token(ada))
        pending = locate_in_background(proxy.base, agent_token(ada))
        ping = await next_of(ws, "locate")
        await ws.send(json.dumps({"type": "location", "id": ping["id"], "latitude": 52.52, "longitude": 13.405,
                                  "accuracy_m": 9, "timestamp_ms": int(time.time() * 1000)}))
        answer = await asyncio.to_thread(pending.result)
        await ws.close()
        return answer

    status, body, _ = asyncio.run(scenario())
    assert status == 200 and json.loads(body)["latitude"] == 52.52, (status, body)


@pytest.mark.parametrize("headers", [
    {"X-Forwarded-For": "not-an-address"},
    {"X-Forwarded-For": "300.1.2.3"},
    {"X-Forwarded-For": STRANGER, "Forwarded": "for=198.51.100.9"},
], ids=["word", "out-of-range", "xff-and-forwarded-disagree"])
def test_a_malformed_or_conflicting_header_is_ignored_and_counted(proxy, headers):
    """A header malformed at the element the walk reaches, or X-Forwarded-For and Forwarded naming different clients, is ignored and counted once per request."""
    before = ignored_headers(proxy.relay)
    for _ in range(3):
        assert locate(proxy.base, bad_key(), headers)[0] == 401
    assert ignored_headers(proxy.relay) == before + 3


def test_forwarded_names_the_client_when_there_is_no_x_forwarded_for(trusting_relay, admin):
    """From a trusted peer without X-Forwarded-For, RFC 7239 Forwarded names the client: a stranger with forged leftmost `for=` values is limited as itself, another client is not."""
    stranger = "2001:db8::7"
    answers = [locate(trusting_relay.base, bad_key(),
                      {"Forwarded": f"for={forwarded_node(forged_address())}, for={forwarded_node(stranger)};proto=https"})
               for _ in range(80)]
    assert_limited(answers)
    assert_unaffected(trusting_relay.base, admin, {"Forwarded": f"for={CLIENT};proto=https"})


def test_a_forwarding_header_from_an_untrusted_peer_is_ignored(untrusting_relay):
    """From a peer outside TRUSTED_PROXIES, a different X-Forwarded-For and Forwarded on every request give no fresh budget: the peer is the client and gets 429."""
    answers = [locate(untrusting_relay.base, bad_key(),
                      {"X-Forwarded-For": forged_address(), "Forwarded": f"for={forwarded_node(forged_address())}"})
               for _ in range(80)]
    assert_limited(answers)


def test_bad_keys_from_one_ipv6_64_share_one_budget(trusting_relay, admin):
    """Hostile input round 3: behind TRUSTED_PROXIES, bad keys from
    80 addresses of one IPv6 /64 (an attacker's subscriber block) are limited as one client;
    a client in another /64 is not. Before, every address had a budget of its own and none of
    them was refused (0 of 300 in the review)."""
    block = "2001:db8:7:7:"
    answers = [locate(trusting_relay.base, bad_key(),
                      {"X-Forwarded-For": block + ":".join(f"{random.getrandbits(16):x}" for _ in range(4))})
               for _ in range(80)]
    assert_limited(answers)
    assert_unaffected(trusting_relay.base, admin, {"X-Forwarded-For": "2001:db8:7:8::1"})


def test_a_valid_credential_is_never_refused_for_what_others_at_its_address_sent(trusting_relay, admin):
    """Hostile input round 3: a stranger's bad agent keys spend the
    budget of an address it shares with a customer (a NAT, a café); the customer's valid
    agent key, never used before (so looked up), and agent token from that same address are
    still served — keys are signed, and a signed key is looked up whatever its address's
    budget. Forgeries from the address stay refused before any lookup."""
    shared = {"X-Forwarded-For": "198.51.100.9"}
    assert_limited([locate(trusting_relay.base, bad_key(), shared) for _ in range(80)])
    owner = user(admin, "Agent Owner")
    for credential in (agent_key(admin, owner), agent_token(owner)):
        status, body, _ = locate(trusting_relay.base, credential, shared)
        assert status == 503 and body.startswith(NOT_CONNECTED), (status, body)
    statuses = [locate(trusting_relay.base, bad_key(), shared)[0] for _ in range(40)]
    assert set(statuses) <= {401, 429} and statuses.count(429) >= 20, f"forgeries stay limited: {statuses}"
