"""Behind the load balancer, limits count real clients (docs/deploy.md, "Behind a load
balancer: the client's address").

HAProxy with deploy/haproxy.cfg (send-proxy-v2) in front of two relays that trust it
(TRUSTED_PROXIES=127.0.0.1). Clients connect from different loopback addresses (127.0.0.2,
127.0.0.3), as different machines would. Before: every client had HAProxy's address, so ~40
bad keys from a stranger made every valid agent key that was not cached yet get 429.
Clients are raw sockets, `curl` and HAProxy itself.
"""
import http.client
import json
import math
import os
import socket
import subprocess
import tempfile
import time
import uuid

import pytest

from conftest import ROOT
from relay_server import RelayServer, free_port
from test_hostile import agent_key, user

STRANGER, AGENT = "127.0.0.2", "127.0.0.3"
INITIALIZE = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
    "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "proxy-test", "version": "1"}}})


class Haproxy:
    """deploy/haproxy.cfg in front of the given relays."""

    def __init__(self, relays):
        self.port = free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        self.log = tempfile.NamedTemporaryFile(prefix="haproxy-", suffix=".log", delete=False)
        env = {**os.environ, "WHEREABOT_BIND": f"0.0.0.0:{self.port}",
               "WHEREABOT_RELAY1": f"127.0.0.1:{relays[0].port}", "WHEREABOT_RELAY2": f"127.0.0.1:{relays[1].port}"}
        self.process = subprocess.Popen(["haproxy", "-db", "-f", str(ROOT / "deploy" / "haproxy.cfg")],
                                        env=env, stdout=self.log, stderr=self.log)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and self.status("GET", "/readyz", "127.0.0.1") != 200:
            time.sleep(0.2)

    def status(self, method, path, source, credential=None, body=None):
        """The HTTP status curl gets from `source` (0: no answer)."""
        command = ["curl", "-s", "-o", "/dev/null", "-w", "%{http_code}", "--interface", source, "-X", method,
                   "--max-time", "10", f"{self.base}{path}"]
        if credential:
            command += ["-H", f"Authorization: Bearer {credential}"]
        if body is not None:
            command += ["-H", "Content-Type: application/json", "-H", "Accept: application/json, text/event-stream",
                        "--data", body]
        result = subprocess.run(command, capture_output=True, text=True, timeout=20)
        return int(result.stdout or 0)

    def statuses(self, method, path, source, credentials, body):
        """The statuses of one request per credential, sent from `source` one after another
        over a keep-alive connection (a new one when the relay closes it), and the seconds
        they took: a limiter's refills are counted against that time, not against a guess."""
        connection, statuses = None, []
        started = time.monotonic()
        headers = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
        for credential in credentials:
            if connection is None:
                connection = http.client.HTTPConnection("127.0.0.1", self.port, timeout=10, source_address=(source, 0))
            connection.request(method, path, body=body, headers={**headers, "Authorization": f"Bearer {credential}"})
            response = connection.getresponse()
            response.read()
            statuses.append(response.status)
            if response.will_close:
                connection.close()
                connection = None
        if connection is not None:
            connection.close()
        return statuses, time.monotonic() - started

    def stop(self):
        self.process.terminate()
        self.process.wait(timeout=10)


@pytest.fixture
def cluster():
    relays = [RelayServer(TRUSTED_PROXIES="127.0.0.1"), RelayServer(TRUSTED_PROXIES="127.0.0.1")]
    proxy = Haproxy(relays)
    yield relays, proxy
    proxy.stop()
    for relay in relays:
        if relay.process.poll() is None:
            relay.stop()


def test_a_strangers_failures_never_refuse_another_clients_valid_key(cluster, admin):
    relays, proxy = cluster
    assert proxy.status("GET", "/readyz", STRANGER) == 200, "haproxy's health checks and traffic reach the relays"
    # 80 bad keys: each instance's limiter (a burst of 20, refilled 2 a second) sees far
    # more than its budget, so the ones past it are refused before any lookup. What the two
    # limiters can have let through is counted against the time the requests took (80 curl
    # processes once took over 5 s under the parallel make test, and the refills with them:
    # once).
    statuses, took = proxy.statuses("POST", "/mcp", STRANGER, ["wb_" + uuid.uuid4().hex * 2 for _ in range(80)], INITIALIZE)
    budget = 2 * (20 + 2 * math.ceil(took))
    assert statuses[0] == 401 and set(statuses) == {401, 429}, statuses
    assert statuses.count(401) <= budget and statuses.count(429) >= 1, f"the stranger is limited ({took:.1f} s): {statuses}"
    key = agent_key(admin, user(admin, "Agent Owner"))
    # A valid key nobody has used yet (not cached on either instance), from another client.
    assert [proxy.status("POST", "/mcp", AGENT, key, INITIALIZE) for _ in range(2)] == [200, 200]
    # And that client's own failures are its own: a bad key from it is 401, not 429.
    assert proxy.status("POST", "/mcp", AGENT, "wb_" + uuid.uuid4().hex * 2, INITIALIZE) == 401


def send_raw(port, data, source):
    """Sends `data` from `source` straight to a relay; (status line, closed) of the answer."""
    with socket.create_connection(("127.0.0.1", port), timeout=5, source_address=(source, 0)) as conn:
        conn.sendall(data)
        received = b""
        while True:
            chunk = conn.recv(65536)
            if not chunk:
                return received.split(b"\r\n", 1)[0].decode(), True
            received += chunk
            if b"\r\n\r\n" in received and b"Connection: close" not in received:
                return received.split(b"\r\n", 1)[0].decode(), False


def test_a_proxy_header_counts_only_from_a_trusted_proxy(cluster):
    relays, _ = cluster
    header = b"PROXY TCP4 198.51.100.9 127.0.0.1 4000 80\r\n"
    request = b"GET /healthz HTTP/1.1\r\nHost: relay\r\n\r\n"
    assert send_raw(relays[0].port, header + request, STRANGER) == ("HTTP/1.1 400 Bad Request", True), \
        "a PROXY header from a peer outside TRUSTED_PROXIES is refused and the connection closes"
    assert send_raw(relays[0].port, header + request, "127.0.0.1")[0] == "HTTP/1.1 200 OK", "from the proxy it is believed"
    assert send_raw(relays[0].port, request, "127.0.0.1")[0] == "HTTP/1.1 200 OK", "the proxy may also connect without one"
    broken = b"PROXY TCP4 198.51.100.9 127.0.0.1 99999 80\r\n"
    assert send_raw(relays[0].port, broken + request, "127.0.0.1") == ("HTTP/1.1 400 Bad Request", True)
