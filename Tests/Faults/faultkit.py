"""A whole Whereabot deployment for fault tests: its own PostgreSQL cluster (so that it can
be restarted and crashed without disturbing other tests), two `whereabot serve`
processes, HAProxy with deploy/haproxy.cfg, phones played by Python `websockets` that
answer after a delay and reconnect like the app, and agents that POST /v1/locate."""
import asyncio
import concurrent.futures
import json
import os
import pathlib
import random
import signal
import socket
import subprocess
import threading
import time
import urllib.error
import urllib.request
import uuid

import jwt
import psycopg
import websockets

ROOT = pathlib.Path(__file__).resolve().parents[2]
BINARY = ROOT / ".build" / "debug" / "whereabot"
SECRET = "fault-tests-jwt-secret-with-at-least-32-characters"
# Below the kernel's ephemeral range (32768-60999): a cluster that restarts on a port in it
# can find the port taken by some client's outgoing connection (the failover pair's 54342
# once was, by the storm's phones, and `pg_ctl start` failed).
PORT = int(os.environ.get("WHEREABOT_FAULTS_PGPORT", "25341"))
DATA = pathlib.Path(os.environ.get("WHEREABOT_FAULTS_PGDATA", "/var/tmp/whereabot-faults/pgdata"))
DB = "whereabot_faults"
PG_BIN = sorted(pathlib.Path("/usr/lib/postgresql").glob("*/bin"))[-1]
LOGS = ROOT / ".local" / "faults"


def free_port():
    """A free port below the kernel's ephemeral range, as PORT is: the relays and HAProxy
    bind theirs after this returns, and relays restart on theirs; a port from the ephemeral
    range can be taken meanwhile by any outgoing connection of the busy machine (then every
    test behind HAProxy found no phone connected)."""
    while True:
        port = random.randrange(20000, 32000)
        if abs(port - PORT) < 8:
            continue
        with socket.socket() as sock:
            try:
                sock.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port


def wait_until(condition, timeout, what):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


class Postgres:
    """The fault tests' own cluster: shim, migrations and relay login as `make test` has them."""

    env = {**os.environ, "PGDATA_LOCAL": str(DATA), "PGPORT_LOCAL": str(PORT), "TEST_DB": DB}
    admin_url = f"postgresql://supabase_admin:postgres@127.0.0.1:{PORT}/{DB}"
    relay_url = f"postgresql://whereabot_relay:whereabot-relay-dev@127.0.0.1:{PORT}/{DB}"

    def start(self):
        subprocess.run([ROOT / "scripts" / "db.sh", "start"], env=self.env, check=True, stdout=subprocess.DEVNULL)
        subprocess.run([ROOT / "scripts" / "db.sh", "reset-test"], env=self.env, check=True)
        # A fresh cluster's WAL (its schema, the migrations) is checkpointed, so that a test's
        # crash replays its own seconds of WAL, not all of it: on a loaded machine that took
        # 28 s, past the calls' deadlines (P12).
        self.query("checkpoint")

    def pg_ctl(self, *args):
        command = [str(PG_BIN / "pg_ctl"), "-D", str(DATA), *args]
        if os.geteuid() == 0:
            command = ["runuser", "-u", "postgres", "--", *command]
        subprocess.run(command, check=True, stdout=subprocess.DEVNULL)

    def restart(self, mode="fast", down_for=0.0, during=None):
        """pg_ctl stop -m MODE, `down_for` seconds of outage (running `during()` in it),
        start. With mode immediate (a crash) recovery resets every UNLOGGED table to empty."""
        self.pg_ctl("-m", mode, "-w", "stop")
        started = time.monotonic()
        if during:
            during()
        time.sleep(max(0.0, down_for - (time.monotonic() - started)))
        self.start_server()

    def stop(self):
        self.pg_ctl("-m", "fast", "-w", "stop")

    def start_server(self):
        """Starts the stopped cluster (without resetting anything)."""
        self.pg_ctl("-l", str(DATA.parent / "postgres.log"), "-w", "-t", "60", "start")

    def running(self):
        command = [str(PG_BIN / "pg_ctl"), "-D", str(DATA), "status"]
        if os.geteuid() == 0:
            command = ["runuser", "-u", "postgres", "--", *command]
        return subprocess.run(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL).returncode == 0

    def query(self, sql, params=()):
        with psycopg.connect(self.admin_url, autocommit=True) as conn:
            cursor = conn.execute(sql, params)
            return cursor.fetchall() if cursor.description else []

    def make_users(self, count):
        """`count` users, each with a session: [(user_id, phone_token, agent_token)]."""
        users = []
        with psycopg.connect(self.admin_url, autocommit=True) as conn:
            for _ in range(count):
                user, session = uuid.uuid4(), uuid.uuid4()
                email = f"{user.hex[:12]}@faults.example"
                conn.execute("insert into auth.users (id, aud, role, email, raw_user_meta_data, created_at, updated_at)"
                             " values (%s, 'authenticated', 'authenticated', %s, '{}', now(), now())", (user, email))
                conn.execute("insert into auth.sessions (id, user_id, created_at) values (%s, %s, now())", (session, user))
                users.append((user, token(user, session, email), token(user, session, email, client_id="fault-agent")))
        return users


def another_agent(agent_token, n):
    """The same user's agent number `n` (its own client id)."""
    claims = jwt.decode(agent_token, SECRET, algorithms=["HS256"], options={"verify_aud": False})
    return jwt.encode({**claims, "client_id": f"{claims['client_id']}-{n}"}, SECRET, algorithm="HS256")


def token(user, session, email, client_id=None):
    now = int(time.time())
    claims = {"sub": str(user), "aud": "authenticated", "role": "authenticated", "email": email,
              "session_id": str(session), "iat": now, "exp": now + 3600}
    if client_id:
        claims["client_id"] = client_id
    return jwt.encode(claims, SECRET, algorithm="HS256")


class Relay:
    """One `whereabot serve` process with a fixed instance id and port."""

    def __init__(self, name, database_url, **environment):
        self.name, self.database_url, self.port = name, database_url, free_port()
        self.environment = environment
        self.base = f"http://127.0.0.1:{self.port}"
        self.process = None
        self.exit_codes = []

    def start(self, wait=True):
        """Starts the process; with `wait`, until /readyz says ready (a relay whose database
        or signing keys are down serves at once and becomes ready by itself)."""
        LOGS.mkdir(parents=True, exist_ok=True)
        env = {**os.environ, "DATABASE_URL": self.database_url, "SUPABASE_JWT_SECRET": SECRET, "PORT": str(self.port),
               "PUBLIC_URL": self.base, "INSTANCE_ID": self.name, "TRUSTED_PROXIES": "127.0.0.1", **self.environment}
        log = open(LOGS / f"{self.name}.log", "a")
        self.process = subprocess.Popen([str(BINARY), "serve"], env=env, stdout=log, stderr=log)
        if wait:
            wait_until(self.ready, 20, f"{self.name} ready")
        else:
            wait_until(self.serving, 20, f"{self.name} serving")

    def get(self, path, timeout=2):
        """(status, body) of a GET; status 0 when nothing answered."""
        try:
            with urllib.request.urlopen(self.base + path, timeout=timeout) as response:
                return response.status, response.read().decode()
        except urllib.error.HTTPError as error:
            return error.code, error.read().decode()
        except OSError:
            return 0, ""

    def serving(self):
        return self.get("/healthz", timeout=1)[0] == 200

    def readiness(self):
        """(status, body) of /readyz."""
        return self.get("/readyz")

    def ready(self):
        return self.get("/readyz", timeout=1)[0] == 200

    def metric(self, name):
        try:
            with urllib.request.urlopen(self.base + "/metrics", timeout=2) as response:
                for line in response.read().decode().splitlines():
                    if line.startswith(name + " "):
                        return float(line.split()[1])
        except OSError:
            return 0.0
        return 0.0

    def terminate(self):
        """SIGTERM: the relay drains; returns without waiting."""
        self.process.send_signal(signal.SIGTERM)

    def wait(self, timeout):
        code = self.process.wait(timeout=timeout)
        self.exit_codes.append(code)
        return code

    def kill(self):
        self.process.kill()
        self.process.wait()

    def stop(self):
        if self.process and self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.kill()


class Haproxy:
    """HAProxy with deploy/haproxy.cfg in front of two relays."""

    def __init__(self, relays):
        self.port = free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        self.relays = relays
        self.process = None

    def start(self):
        env = {**os.environ, "WHEREABOT_BIND": f"127.0.0.1:{self.port}",
               "WHEREABOT_RELAY1": f"127.0.0.1:{self.relays[0].port}", "WHEREABOT_RELAY2": f"127.0.0.1:{self.relays[1].port}"}
        log = open(LOGS / "haproxy.log", "a")
        self.process = subprocess.Popen(["haproxy", "-db", "-f", str(ROOT / "deploy" / "haproxy.cfg")],
                                        env=env, stdout=log, stderr=log)
        wait_until(lambda: self.reachable(), 10, "haproxy")

    def reachable(self):
        try:
            socket.create_connection(("127.0.0.1", self.port), timeout=0.2).close()
            return True
        except OSError:
            return False

    def stop(self):
        if self.process:
            self.process.terminate()
            self.process.wait(timeout=10)


class Phones:
    """One phone per user, each on its own WebSocket like the app: hello, answer every ping
    with a fix after `delay` seconds, reconnect 0.2-0.5 s after any close but 4000.
    The first connection goes to `first_url`, reconnects to `url`."""

    def __init__(self, users, url, first_url=None, delay=2.0):
        self.users, self.url, self.first_url, self.delay = users, url, first_url or url, delay
        # Answers wait for this too: a test holds them until its whole load is in flight
        # (`hold()` … `release()`), then each comes `delay` seconds after the later of its
        # ping and the release.
        self.released = threading.Event()
        self.released.set()
        self.loop = asyncio.new_event_loop()
        self.stopping = False
        self.hellos = 0
        self.pings = 0
        self.pinged = {}  # request id -> [(seconds since start, the socket's number), …]: a double ping explains itself
        self.started = time.monotonic()
        self.answers = 0
        self.reconnects = 0
        self.connected = set()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)

    def start(self):
        self.thread.start()
        for user, phone_token, _ in self.users:
            asyncio.run_coroutine_threadsafe(self.phone(user, phone_token), self.loop)
        wait_until(lambda: len(self.connected) == len(self.users), 30, "every phone connected")

    def stop(self):
        self.stopping = True
        for task in asyncio.all_tasks(self.loop):
            self.loop.call_soon_threadsafe(task.cancel)
        time.sleep(0.2)
        self.loop.call_soon_threadsafe(self.loop.stop)

    async def phone(self, user, phone_token):
        device = str(uuid.uuid4())
        url = self.first_url
        while not self.stopping:
            try:
                async with websockets.connect(url + "/v1/device", open_timeout=5,
                                              additional_headers={"Authorization": "Bearer " + phone_token}) as ws:
                    await ws.send(json.dumps({"type": "hello", "app_version": "faults", "device_id": device,
                                              "device_name": "Fault phone", "platform": "ios"}))
                    self.hellos += 1
                    socket = self.hellos
                    self.connected.add(user)
                    async for text in ws:
                        message = json.loads(text)
                        if message.get("type") == "locate":
                            self.pings += 1
                            self.pinged.setdefault(message["id"], []).append(
                                (round(time.monotonic() - self.started, 2), socket))
                            asyncio.ensure_future(self.answer(ws, message["id"]))
            except websockets.ConnectionClosed as closed:
                if closed.rcvd is not None and closed.rcvd.code == 4000:
                    return
            except (OSError, asyncio.TimeoutError, websockets.InvalidStatus, websockets.InvalidHandshake):
                pass
            self.connected.discard(user)
            self.reconnects += 1
            url = self.url
            await asyncio.sleep(0.2 + random.random() * 0.3)

    def pinged_twice(self):
        """The requests whose ping came more than once, with when and on which socket
        (numbered by hello), and how many reconnects there were: for an assertion's message."""
        twice = {request: times for request, times in self.pinged.items() if len(times) > 1}
        return f"pinged more than once: {twice}; reconnects: {self.reconnects}"

    def hold(self):
        """Answers wait until `release()`."""
        self.released.clear()

    def release(self):
        self.released.set()

    async def answer(self, ws, request_id):
        while not self.released.is_set():
            await asyncio.sleep(0.05)
        await asyncio.sleep(self.delay)
        fix = {"type": "location", "id": request_id, "latitude": 52.52, "longitude": 13.405, "accuracy_m": 12,
               "timestamp_ms": int(time.time() * 1000)}
        try:
            await ws.send(json.dumps(fix))
            self.answers += 1
        except websockets.ConnectionClosed:
            pass  # the next connection gets the ping again at hello


def locate(base, agent_token, timeout_secs=60, retries=20):
    """POST /v1/locate like a careful agent: a 503 with Retry-After from a draining
    instance is retried. Returns (status, body)."""
    return locate_once(base, agent_token, timeout_secs, retries)[:2]


def locate_once(base, agent_token, timeout_secs=60, retries=1):
    """(status, body, Retry-After) of POST /v1/locate, retrying a draining instance's 503."""
    for _ in range(retries):
        request = urllib.request.Request(f"{base}/v1/locate?timeout_secs={timeout_secs}", method="POST",
                                         headers={"Authorization": "Bearer " + agent_token})
        try:
            with urllib.request.urlopen(request, timeout=timeout_secs + 15) as response:
                return response.status, response.read().decode(), None
        except urllib.error.HTTPError as error:
            body = error.read().decode()
            if retries > 1 and error.code == 503 and error.headers.get("Retry-After") and "restarting" in body:
                time.sleep(float(error.headers["Retry-After"]))
                continue
            return error.code, body, error.headers.get("Retry-After")
        except OSError as error:
            return 0, str(error), None
    return 0, "gave up", None


class Agents:
    """`per_user` concurrent locates for each user, all in flight at once, each by an agent of
    its own (one agent's repeated ask joins the request it already has waiting)."""

    def __init__(self, users, base, per_user=4, timeout_secs=60):
        self.pool = concurrent.futures.ThreadPoolExecutor(max_workers=len(users) * per_user)
        self.futures = [self.pool.submit(locate, base, another_agent(agent_token, n), timeout_secs)
                        for _, _, agent_token in users for n in range(per_user)]

    def results(self, timeout):
        done, pending = concurrent.futures.wait(self.futures, timeout=timeout)
        results = [future.result() for future in done]
        self.pool.shutdown(wait=False, cancel_futures=True)
        return results, len(pending)


def report(name, sent, results, hung):
    answered = sum(1 for status, body in results if status == 200 and '"latitude":52.52' in body)
    lost = sent - answered
    print(f"\n{name}: sent {sent} / answered {answered} / lost {lost} (hung {hung})")
    others = sorted({f"{status} {body[:80]}" for status, body in results if status != 200})
    for line in others:
        print("   ", line)
    return lost


def pending(relays):
    return sum(relay.metric("whereabot_pending_requests") for relay in relays if relay.process.poll() is None)


def open_durable(base, agent_token, timeout_secs=300, retries=20):
    """POST /v1/locate with Prefer: respond-async (a draining instance's 503 is retried):
    the request's status URL path, or None."""
    for _ in range(retries):
        request = urllib.request.Request(f"{base}/v1/locate?timeout_secs={timeout_secs}", method="POST",
                                         headers={"Authorization": "Bearer " + agent_token, "Prefer": "respond-async"})
        try:
            with urllib.request.urlopen(request, timeout=15) as response:
                if response.status == 202:
                    return response.headers["Location"]
        except urllib.error.HTTPError as error:
            if error.code != 503:
                return None
        except OSError:
            pass
        time.sleep(1)
    return None


def fetch_durable(base, agent_token, path, timeout=120):
    """Long-polls a durable request until it settles, through whatever answers at `base`
    (503s of draining instances and refused connections are retried). (status, body)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        request = urllib.request.Request(f"{base}{path}?wait_secs=20", headers={"Authorization": "Bearer " + agent_token})
        try:
            with urllib.request.urlopen(request, timeout=30) as response:
                if response.status == 200:
                    return 200, response.read().decode()
        except urllib.error.HTTPError as error:
            if error.code not in (503, 429):
                return error.code, error.read().decode()
        except OSError:
            pass
        time.sleep(1)
    return 0, "still waiting"
