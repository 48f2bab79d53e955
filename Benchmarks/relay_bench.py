"""`make bench-relay`: the relay end to end (docs/testing.md, "Benchmarks"), printed as one
table.

Two release relays on a database of their own (whereabot_bench on the local cluster):
  1. locate latency p50/p99 with a phone that answers at once: same instance, cross
     instance, and the floor measured in the same run (a WebSocket echo round trip through
     HTTPServer plus a NOTIFY round trip), with the ratios;
  2. locates/s with N concurrent agents, p50 and p99 under that load, CPU and Postgres WAL
     bytes per locate, beside pgbench's NOTIFY-only ceiling on the same database, at 2
     instances and again at 4;
  3. memory per idle phone (authenticated socket that said hello) at 10,000 connections,
     and the WAL an idle phone costs per minute (beats, and the 5-minute last_seen_at
     refresh amortized);
  4. reconnect storm: the instance holding 10,000 phones restarts with a pending ping for
     each; time until every phone has said hello again and got its ping, with the phones
     coming from 1, 200 and 10,000 source addresses (one storm and one row each: behind a
     balancer or a carrier NAT, thousands of phones share one address), and the relay's
     and Postgres's CPU for each;
  5. durable requests (durable_bench.py): tasks/get on a settled task, and Postgres's work
     per durable request beside a synchronous one.

The phones and agents are a small asyncio client (this file; the storm's phones run in
processes of their own, storm_phones.py). Everything runs on this machine: client, relays and Postgres share its cores.

usage: relay_bench.py  (environment: BENCH_ADMIN_URL, BENCH_RELAY_URL, BENCH_PHONES,
                        BENCH_SECONDS, BENCH_AGENTS, BENCH_SAMPLES,
                        BENCH_PARTS=latency,throughput,durable,memory,storm, BENCH_RELAY_BINARY,
                        BENCH_STORM_ADDRESSES=1,200,10000, BENCH_UPROBES=1: calls of malloc and
                        the task switches per locate, counted by perf)
"""
import asyncio
import base64
import json
import os
import pathlib
import random
import resource
import signal
import socket as socket_module
import statistics
import struct
import subprocess
import sys
import tempfile
import time
import uuid

import jwt
import psycopg

from durable_bench import durable_rows, enable_function_stats
from idle_websockets import rss_kib

ROOT = pathlib.Path(__file__).resolve().parents[1]
# BENCH_RELAY_BINARY: another build of the relay to measure (an older commit, for before/after).
RELAY = pathlib.Path(os.environ.get("BENCH_RELAY_BINARY", ROOT / ".build" / "release" / "whereabot"))
ECHO = ROOT / ".build" / "release" / "http-echo-server"
LOAD = ROOT / ".build" / "release" / "locate-load"
SECRET = "benchmark-jwt-secret-with-at-least-32-characters"
ADMIN_URL = os.environ["BENCH_ADMIN_URL"]
RELAY_URL = os.environ["BENCH_RELAY_URL"]
PHONES = int(os.environ.get("BENCH_PHONES", "10000"))
SECONDS = float(os.environ.get("BENCH_SECONDS", "10"))
AGENTS = int(os.environ.get("BENCH_AGENTS", "32"))
SAMPLES = int(os.environ.get("BENCH_SAMPLES", "300"))
PARTS = set(os.environ.get("BENCH_PARTS", "latency,throughput,durable,memory,storm").split(","))
UPROBES = os.environ.get("BENCH_UPROBES") == "1"
# BENCH_STORM_ADDRESSES: the reconnect storms to run, as how many source addresses the phones
# come from (one storm each, in this order; at most 254 * 254, see storm_address).
STORM_ADDRESSES = [int(count) for count in os.environ.get("BENCH_STORM_ADDRESSES", "1,200,10000").split(",")
                   if count.strip()]
if any(not 1 <= count <= 254 * 254 for count in STORM_ADDRESSES):
    raise SystemExit(f"BENCH_STORM_ADDRESSES: each count is 1 to {254 * 254}, not {STORM_ADDRESSES}")
FIX = {"latitude": 52.52, "longitude": 13.405, "accuracy_m": 12}


def progress(text):
    print(f"[{time.strftime('%H:%M:%S')}] {text}", file=sys.stderr, flush=True)


async def metric_reaches(relay, name, target, timeout, what):
    deadline = time.monotonic() + timeout
    value = 0.0
    while time.monotonic() < deadline:
        value = await relay.metric(name)
        if value >= target:
            return
        await asyncio.sleep(0.1)
    raise RuntimeError(f"{what}: {name} is {value:.0f}, not {target}, after {timeout} s")


def percentile(values, fraction):
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


# -- a minimal WebSocket client (RFC 6455, client side: masked frames) -----------------

class Socket:
    def __init__(self, reader, writer):
        self.reader, self.writer = reader, writer

    @classmethod
    async def open(cls, port, path, headers=(), local_host=None):
        local = (local_host, 0) if local_host else None
        reader, writer = await asyncio.open_connection("127.0.0.1", port, local_addr=local)
        key = base64.b64encode(os.urandom(16)).decode()
        extra = "".join(f"{name}: {value}\r\n" for name, value in headers)
        writer.write((f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nUpgrade: websocket\r\n"
                      f"Connection: Upgrade\r\nSec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n"
                      f"{extra}\r\n").encode())
        head = await reader.readuntil(b"\r\n\r\n")
        if not head.startswith(b"HTTP/1.1 101"):
            writer.close()
            raise ConnectionError(head.split(b"\r\n")[0].decode())
        return cls(reader, writer)

    def send(self, text, opcode=1):
        payload = text.encode() if isinstance(text, str) else text
        mask = os.urandom(4)
        length = len(payload)
        header = bytes([0x80 | opcode])
        if length < 126:
            header += bytes([0x80 | length])
        else:
            header += bytes([0x80 | 126]) + struct.pack("!H", length)
        masked = bytes(b ^ mask[i % 4] for i, b in enumerate(payload))
        self.writer.write(header + mask + masked)

    async def receive(self):
        """The next text message; answers pings; answers a close and raises ConnectionError."""
        while True:
            first, second = await self.reader.readexactly(2)
            length = second & 0x7F
            if length == 126:
                length = struct.unpack("!H", await self.reader.readexactly(2))[0]
            elif length == 127:
                length = struct.unpack("!Q", await self.reader.readexactly(8))[0]
            payload = await self.reader.readexactly(length)
            opcode = first & 0x0F
            if opcode == 1:
                return payload.decode()
            if opcode == 9:
                self.send(payload, opcode=10)
            elif opcode == 8:  # the closing handshake, as a real client completes it (RFC 6455 §5.5.1)
                self.send(payload[:2], opcode=8)
                self.writer.close()
                raise ConnectionError("closed")

    def close(self):
        self.writer.close()


# -- users, tokens, relays -------------------------------------------------------------

def make_users(count):
    """count users with sessions, inserted in one statement: [(user, phone_token, agent_token)]."""
    with psycopg.connect(ADMIN_URL, autocommit=True) as conn:
        created = conn.execute("""
            insert into auth.users (id, aud, role, email, raw_user_meta_data, created_at, updated_at)
            select gen_random_uuid(), 'authenticated', 'authenticated', 'bench-' || gen_random_uuid() || '@bench.example',
                   '{}', now(), now()
            from generate_series(1, %s)
            returning id, email""", (count,)).fetchall()
        sessions = [uuid.uuid4() for _ in created]
        conn.execute("insert into auth.sessions (id, user_id, created_at)"
                     " select s, u, now() from unnest(%s::uuid[], %s::uuid[]) as t(s, u)",
                     (sessions, [user for user, _ in created]))
    rows = [(user, session, email) for (user, email), session in zip(created, sessions)]
    now = int(time.time())
    users = []
    for user, session, email in rows:
        claims = {"sub": str(user), "aud": "authenticated", "role": "authenticated", "email": email,
                  "session_id": str(session), "iat": now, "exp": now + 7200}
        users.append((user, jwt.encode(claims, SECRET, algorithm="HS256"),
                      jwt.encode({**claims, "client_id": "bench-agent"}, SECRET, algorithm="HS256")))
    return users


class Relay:
    def __init__(self, name, port):
        self.name, self.port, self.process = name, port, None

    def start(self):
        with socket_module.socket() as probe:  # a leftover relay on the port would answer in our stead
            probe.setsockopt(socket_module.SOL_SOCKET, socket_module.SO_REUSEADDR, 1)  # as the relay binds
            try:
                probe.bind(("127.0.0.1", self.port))
            except OSError:
                raise RuntimeError(f"port {self.port} is taken (a relay left over from an earlier run?)") from None
        env = {**os.environ, "DATABASE_URL": RELAY_URL, "SUPABASE_JWT_SECRET": SECRET, "PORT": str(self.port),
               "INSTANCE_ID": self.name}
        self.process = subprocess.Popen([str(RELAY), "serve"], env=env, stdout=subprocess.DEVNULL,
                                        stderr=subprocess.DEVNULL)
        self.started = time.monotonic()

    async def ready(self):
        while self.process.poll() is None:
            try:
                status, _ = await http(self.port, "GET", "/readyz")
                if status == 200:
                    return
            except OSError:
                pass
            await asyncio.sleep(0.02)
        raise RuntimeError(f"{self.name} exited with {self.process.returncode} before it was ready")

    async def metric(self, name):
        _, body = await http(self.port, "GET", "/metrics")
        for line in body.splitlines():
            if line.startswith(name + " "):
                return float(line.split()[1])
        return 0.0

    def stop(self):
        self.process.send_signal(signal.SIGTERM)
        self.process.wait(timeout=60)


async def http(port, method, path, token=None, connection=None):
    """One HTTP/1.1 request; `connection` (reader, writer) is reused when given."""
    reader, writer = connection or await asyncio.open_connection("127.0.0.1", port)
    auth = f"Authorization: Bearer {token}\r\n" if token else ""
    writer.write(f"{method} {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n{auth}Content-Length: 0\r\n\r\n".encode())
    head = (await reader.readuntil(b"\r\n\r\n")).decode()
    length = 0
    for line in head.split("\r\n"):
        if line.lower().startswith("content-length:"):
            length = int(line.split(":")[1])
    body = (await reader.readexactly(length)).decode()
    if connection is None:
        writer.close()
    return int(head.split()[1]), body


DEVICES = {}  # phone token → device id: a phone keeps its device id across reconnects, as the app does
CLIENT_ERRORS = []  # unexpected exceptions in the phones' read loops (reported, never silent)


async def phone(port, phone_token, on_ping=None, local_host=None, answer=True):
    """A connected phone that said hello and answers every ping at once (in a task)."""
    socket = await Socket.open(port, "/v1/device", [("Authorization", "Bearer " + phone_token)], local_host)
    device = DEVICES.setdefault(phone_token, str(uuid.uuid4()))
    socket.send(json.dumps({"type": "hello", "app_version": "bench", "device_id": device,
                            "device_name": "Bench phone", "platform": "ios"}))

    async def serve():
        try:
            while True:
                message = json.loads(await socket.receive())
                if message.get("type") != "locate":
                    continue
                if on_ping:
                    on_ping(message["id"])
                if answer:
                    socket.send(json.dumps({"type": "location", "id": message["id"], **FIX,
                                            "timestamp_ms": int(time.time() * 1000)}))
        except (ConnectionError, asyncio.IncompleteReadError, OSError):
            pass
        except Exception as error:  # a client bug must not pass for a relay that went quiet
            CLIENT_ERRORS.append(repr(error))
            socket.close()
    return socket, asyncio.ensure_future(serve())


# -- 1. latency and its floor -----------------------------------------------------------

async def echo_latencies(samples):
    """WebSocket round trips through HTTPServer's echo server, with the generator's client."""
    echo_port = 18190
    process = subprocess.Popen([str(ECHO)], env={**os.environ, "PORT": str(echo_port)},
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        for _ in range(100):
            try:
                socket_module.create_connection(("127.0.0.1", echo_port), timeout=0.2).close()
                break
            except OSError:
                await asyncio.sleep(0.05)
        return await asyncio.to_thread(run_load, [], None, samples, echo_port)
    finally:
        process.terminate()
        process.wait()


def notify_latencies(samples):
    listener = psycopg.connect(ADMIN_URL, autocommit=True)
    sender = psycopg.connect(ADMIN_URL, autocommit=True)
    listener.execute("listen relay_bench_floor")
    latencies = []
    for index in range(samples + 20):
        started = time.perf_counter()
        sender.execute("select pg_notify('relay_bench_floor', 'x')")
        for _ in listener.notifies(timeout=5, stop_after=1):
            pass
        if index >= 20:
            latencies.append((time.perf_counter() - started) * 1000)
    listener.close()
    sender.close()
    return latencies


# -- 2. throughput ----------------------------------------------------------------------

def proc_stat(pid):
    """The fields of /proc/<pid>/stat after the command: [0] is field 3 (state), [1] the
    parent's pid (4), [11:15] utime, stime, cutime, cstime (14-17), in clock ticks."""
    return pathlib.Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()


def context_switches(pids):
    """Context switches of every thread of the given processes so far (voluntary and not,
    from /proc/<pid>/task/*/status): each is a thread that slept and was woken, the cost of
    handing work between threads (a thread that exited meanwhile is not counted)."""
    total = 0
    for pid in pids:
        for status in pathlib.Path(f"/proc/{pid}/task").glob("*/status"):
            try:
                total += sum(int(line.split()[1]) for line in status.read_text().splitlines()
                             if line.startswith(("voluntary_ctxt_switches", "nonvoluntary_ctxt_switches")))
            except (FileNotFoundError, ProcessLookupError):
                pass
    return total


def cpu_seconds(pids):
    """User plus system CPU seconds of the given processes so far (from /proc)."""
    total = 0
    for pid in pids:
        try:
            fields = proc_stat(pid)
            total += int(fields[11]) + int(fields[12])
        except (FileNotFoundError, ProcessLookupError, IndexError):
            pass
    return total / os.sysconf("SC_CLK_TCK")


POSTMASTER = []  # the pid of the bench cluster's postmaster, once found


def postmaster_pid():
    """The postmaster of the cluster BENCH_ADMIN_URL points at (the local one, port 54322):
    the parent of this connection's backend."""
    if not POSTMASTER:
        with psycopg.connect(ADMIN_URL, autocommit=True) as connection:
            backend = connection.execute("select pg_backend_pid()").fetchone()[0]
            try:
                parent = int(proc_stat(backend)[1])
                command = pathlib.Path(f"/proc/{parent}/comm").read_text().strip()
            except (FileNotFoundError, ProcessLookupError, IndexError):
                raise RuntimeError(f"Postgres's backend {backend} is not in this machine's /proc: its CPU cannot be"
                                   " measured") from None
        if command != "postgres":
            raise RuntimeError(f"the parent of Postgres's backend {backend} is {parent} ({command}), not a postmaster")
        POSTMASTER.append(parent)
    return POSTMASTER[0]


def postgres_cpu_seconds():
    """CPU seconds the bench's Postgres cluster has used so far (only differences mean
    anything): the postmaster's own utime and stime, its cutime and cstime — the times of
    the children it has reaped, so a backend that exited still counts — and the utime and
    stime of its live children (a child's times reach cutime only when it is reaped).
    Summing the live backends alone fell when backends exited between two samples."""
    postmaster = postmaster_pid()
    for _ in range(10):
        before = proc_stat(postmaster)
        children = 0
        for entry in os.scandir("/proc"):
            if not entry.name.isdigit():
                continue
            try:
                fields = proc_stat(entry.name)
            except (FileNotFoundError, ProcessLookupError, IndexError):  # it exited meanwhile
                continue
            if int(fields[1]) == postmaster:
                children += int(fields[11]) + int(fields[12])
        after = proc_stat(postmaster)
        total = sum(int(field) for field in after[11:15]) + children
        if after[13:15] == before[13:15]:  # no child's times moved into cutime while we looked
            break
        # A child reaped during the scan was counted twice or not at all: look again.
    return total / os.sysconf("SC_CLK_TCK")


def run_load(pairs, seconds=None, samples=None, echo_port=None):
    """Runs the compiled load generator (Benchmarks/LocateLoad) on `pairs` of
    (agent port, phone port, agent token, phone token); returns its JSON result."""
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as plan:
        json.dump({"pairs": [{"agent_port": a, "phone_port": p, "agent_token": at, "phone_token": pt}
                             for a, p, at, pt in pairs], "seconds": seconds, "samples": samples,
                   "echo_port": echo_port}, plan)
    try:
        output = subprocess.run([str(LOAD)], env={**os.environ, "LOAD_PLAN": plan.name}, capture_output=True,
                                text=True, timeout=(seconds or 60) + 120, check=True).stdout
    finally:
        os.unlink(plan.name)
    return json.loads(output.strip().splitlines()[-1])


def wal_bytes():
    """Postgres's WAL bytes written so far (pg_stat_wal, the whole cluster)."""
    with psycopg.connect(ADMIN_URL, autocommit=True) as connection:
        return int(connection.execute("select wal_bytes from pg_stat_wal").fetchone()[0])


async def throughput(relays, users, seconds, cross, counting=False):
    """Locates/s with one agent per user asking the instance holding its phone (same) or
    the next one (cross), with the phones spread over every instance; the CPU each party
    spent and the WAL Postgres wrote per locate."""
    pairs = []
    for index, (_, phone_token, agent_token) in enumerate(users):
        phone = relays[index % len(relays)]
        agent = relays[(index + 1) % len(relays)] if cross else phone
        pairs.append((agent.port, phone.port, agent_token, phone_token))
    relay_pids = [relay.process.pid for relay in relays]
    functions = function_stats() if counting else None
    before_relays, before_postgres, before_wal = cpu_seconds(relay_pids), postgres_cpu_seconds(), wal_bytes()
    before_switches = context_switches(relay_pids)
    probes = asyncio.create_task(asyncio.to_thread(count_uprobes, relay_pids, seconds)) if counting else None
    result = await asyncio.to_thread(run_load, pairs, seconds)
    counts = await probes if probes else None
    if counting:
        functions = function_costs(functions, function_stats(), max(1, result["answered"]))
    relays_cpu = cpu_seconds(relay_pids) - before_relays
    switches = context_switches(relay_pids) - before_switches
    postgres_cpu = postgres_cpu_seconds() - before_postgres
    wal = wal_bytes() - before_wal  # includes the phones' hellos and the warm-up: an upper bound
    # The generator's CPU includes connecting the phones; its own figure covers the run only.
    locates = max(1, result["locates"])
    # The counts cover the middle 40 % of the run, which goes at about its average rate.
    per_locate = {name: count / (result["locates"] / result["seconds"] * seconds * 0.4)
                  for name, count in counts.items()} if counts and result["locates"] else None
    return {"rate": result["locates"] / result["seconds"], "failed": result["failed"], "p50": result["p50_ms"],
            "p99": result["p99_ms"], "wal": wal / locates, "uprobes": per_locate, "switches": switches / locates,
            "functions": functions and functions[1], "functions_us": functions and functions[0],
            "cpu": {"client": result["client_cpu_seconds"] / locates * 1000, "relays": relays_cpu / locates * 1000,
                    "postgres": postgres_cpu / locates * 1000}}


def function_stats():
    """{function: (calls, self ms)} of the relay.* and private.* functions so far, once every
    backend has flushed its statistics (PostgreSQL 15: an idle one within 10 s)."""
    time.sleep(11)
    with psycopg.connect(ADMIN_URL, autocommit=True) as conn:
        return {f"{schema}.{name}": (calls, self_ms) for schema, name, calls, self_ms in conn.execute(
            "select schemaname, funcname, sum(calls), sum(self_time) from pg_stat_user_functions"
            " where schemaname in ('relay', 'private') group by 1, 2")}


def function_costs(before, after, locates):
    """(self µs per locate in all, [(function, calls per locate, self µs per locate)] busiest
    first) between two function_stats snapshots."""
    rows = [(name, (calls - before.get(name, (0, 0))[0]) / locates,
             (self_ms - before.get(name, (0, 0))[1]) * 1000 / locates) for name, (calls, self_ms) in after.items()]
    rows = sorted((row for row in rows if row[1] > 0), key=lambda row: -row[2])
    return sum(row[2] for row in rows), rows


def count_uprobes(pids, seconds):
    """Calls of `malloc`, `swift_task_switch` and `swift_task_create` in the relays during
    the middle 40 % of a `seconds` run (BENCH_UPROBES=1; the probes must exist: `perf probe
    -x /lib/x86_64-linux-gnu/libc.so.6 --add malloc`, and the two Swift functions in
    libswift_Concurrency.so)."""
    events = ["probe_libc:malloc", "probe_libswift_Concurrency:swift_task_switch",
              "probe_libswift_Concurrency:swift_task_create"]
    output = subprocess.run(["perf", "stat", "-x", ",", "-e", ",".join(events), "-D", str(int(seconds * 300)),
                             "-p", ",".join(map(str, pids)), "--", "sleep", str(seconds * 0.7)],
                            capture_output=True, text=True, timeout=seconds + 30).stderr
    counts = {}
    for line in output.splitlines():
        fields = line.split(",")
        if len(fields) > 2 and fields[2] in events and fields[0].isdigit():
            counts[fields[2].split(":")[1]] = int(fields[0])
    return counts


async def notifications_per_locate(count, users, locates=200):
    """Starts `count` instances, puts the phones on the first and the agents on the second,
    and counts the notifications every instance received per locate."""
    relays = [Relay(f"bench-fanout-{count}-{i}", 18300 + i) for i in range(count)]
    for relay in relays:
        relay.start()
    try:
        for relay in relays:
            await relay.ready()
        before = [await relay.metric("whereabot_notifications_received_total") for relay in relays]
        pairs = [(relays[1].port, relays[0].port, agent_token, phone_token) for _, phone_token, agent_token in users]
        result = await asyncio.to_thread(run_load, pairs, None, max(1, locates // len(pairs)))
        await asyncio.sleep(0.5)
        after = [await relay.metric("whereabot_notifications_received_total") for relay in relays]
        done = max(1, result["answered"])  # warm-up locates notify too
        # The phones' first hellos notify nobody (whereabot_device goes out only when a hello
        # replaces an older socket of the device), so every notification counted is a locate's.
        return (sum(after) - sum(before)) / done, result["failed"]
    finally:
        for relay in relays:
            relay.stop()


def pgbench_notify_ceiling(clients, seconds):
    with tempfile.NamedTemporaryFile("w", suffix=".sql", delete=False) as script:
        script.write("select pg_notify('relay_bench_ceiling', 'x');\n")
    output = subprocess.run(["pgbench", "-n", "-c", str(clients), "-j", "2", "-T", str(int(seconds)), "-M", "extended",
                             "-f", script.name, ADMIN_URL], capture_output=True, text=True, check=True).stdout
    os.unlink(script.name)
    for line in output.splitlines():
        if line.startswith("tps = "):
            return float(line.split()[2])
    raise RuntimeError("pgbench printed no tps")


# -- 3 and 4. idle phones and the reconnect storm ------------------------------------------

async def connect_many(port, users, on_ping, answer):
    """Opens one phone per user in batches, spreading source addresses over 127.0.0.x."""
    phones = []
    for start in range(0, len(users), 500):
        batch = users[start:start + 500]
        phones += await asyncio.gather(*(phone(port, phone_token, on_ping, f"127.0.0.{2 + (start + i) % 200}", answer)
                                         for i, (_, phone_token, _) in enumerate(batch)))
    return phones


def storm_address(index, count):
    """The source address of phone `index` when the phones come from `count` addresses:
    127.0.0.1 for one (None: the kernel's choice toward 127.0.0.1, which is 127.0.0.1 — and
    connect() then picks ports per destination and reuses loopback TIME_WAIT ones, where
    bind() would need a port free of every TIME_WAIT socket of the address), 127.0.0.2 …
    for up to 253, else 127.1.x.y with x and y 1 to 254 (no .0, no .255)."""
    slot = index % count
    if count == 1:
        return None
    if count <= 253:
        return f"127.0.0.{2 + slot}"
    high, low = divmod(slot, 254)
    return f"127.1.{1 + high}.{1 + low}"


def addresses_text(count):
    return f"{count:,} address" if count == 1 else f"{count:,} addresses"


class ActivitySampler:
    """Samples what Postgres's backends are doing (pg_stat_activity, every 0.1 s, in a thread
    of its own) while a storm runs, so that a storm whose Postgres CPU is out of line says
    which statement it went to."""

    def __init__(self):
        self.counts, self.stopping, self.thread = {}, False, None

    def start(self):
        import threading
        self.thread = threading.Thread(target=self.sample, daemon=True)
        self.thread.start()

    def sample(self):
        with psycopg.connect(ADMIN_URL, autocommit=True) as conn:
            while not self.stopping:
                for query, wait in conn.execute(
                        "select left(regexp_replace(query, '\\s+', ' ', 'g'), 70), coalesce(wait_event, 'cpu')"
                        " from pg_stat_activity where state = 'active' and pid <> pg_backend_pid()"
                        " and backend_type = 'client backend'"):
                    self.counts[(query, wait)] = self.counts.get((query, wait), 0) + 1
                time.sleep(0.1)

    def stop(self):
        self.stopping = True
        self.thread.join()

    def top(self, count=3):
        ranked = sorted(self.counts.items(), key=lambda item: -item[1])[:count]
        return "; ".join(f"{samples}x [{wait}] {query}" for (query, wait), samples in ranked)


STORM_WORKERS = 4  # client processes the storm's phones are spread over (storm_phones.py)


async def storm(relay, users, addresses):
    """Connects one phone per user from `addresses` source addresses (storm_address), opens
    one request per phone (each phone gets its ping and leaves it unanswered), restarts
    `relay`, and times the phones' way back to their pending pings. The phones reconnect as
    the app does (docs/protocol.md, "The socket from a browser"): at once after 1012 "restart",
    then after 1 s, 2 s, 4 s … (at most 30 s) with ±50% jitter. They run in STORM_WORKERS processes of their own
    (storm_phones.py), so that this process's probes are on time and no phone waits for
    another's turn on one event loop. Run again with other addresses: the phones of the run
    before have gone, their requests abandoned."""
    expected = set()  # this run's request ids
    pinged = {}  # request id → seconds after `since` (this run's requests only)
    phones = {str(user): {"open": False, "hello_at": None, "attempts": 0} for user, _, _ in users}
    since = time.monotonic()  # the start of what is counted: the requests' creation, then the restart
    hellos = 0
    where = addresses_text(min(addresses, len(users)))

    async def read_events(worker):
        nonlocal hellos
        async for line in worker.stdout:
            kind, value, *at = line.decode().rstrip("\n").split(" ", 2)
            if kind == "ping" and value in expected and float(at[0]) >= since:
                pinged.setdefault(value, float(at[0]) - since)
            elif kind == "hello" and float(at[0]) >= since:
                hellos += 1
                phones[value].update(hello_at=float(at[0]) - since)
            elif kind == "error":
                CLIENT_ERRORS.append(f"{value} {' '.join(at)}")

    # The phones of an earlier run (or of the memory rows) must have gone, so that the count
    # below is of this run's.
    deadline = time.monotonic() + 60
    while (left := await relay.metric("whereabot_device_connections")) > 0:
        if time.monotonic() > deadline:
            raise RuntimeError(f"storm from {where}: {left:.0f} phones of the run before still connected after 60 s")
        await asyncio.sleep(0.1)
    overflows = listen_overflows()
    script = pathlib.Path(__file__).with_name("storm_phones.py")
    workers, readers = [], []
    for part in range(STORM_WORKERS):
        mine = [(str(user), token, DEVICES.setdefault(token, str(uuid.uuid4())), storm_address(i, addresses))
                for i, (user, token, _) in enumerate(users) if i % STORM_WORKERS == part]
        worker = await asyncio.create_subprocess_exec(sys.executable, str(script), stdin=subprocess.PIPE,
                                                      stdout=subprocess.PIPE, limit=1 << 20)
        worker.stdin.write((json.dumps({"port": relay.port, "phones": mine}) + "\n").encode())
        await worker.stdin.drain()
        workers.append(worker)
        readers.append(asyncio.ensure_future(read_events(worker)))
    try:
        await metric_reaches(relay, "whereabot_device_connections", len(users), 120, f"phones before the storm from {where}")
        # Every phone gets a ping it does not answer; the restarted instance must send it again.
        with psycopg.connect(RELAY_URL, autocommit=True) as conn:
            conn.execute("select relay.register_instance('bench-waiter')")
            since = time.monotonic()
            requests = {str(request): user for _, request, user in conn.execute("""
                with ids as (select gen_random_uuid() as id, u from unnest(%s::uuid[]) u)
                select relay.open_request(id, u, null, 'bench-agent', null, 'bench-waiter',
                                          decode(repeat('ab', 32), 'hex'), now() + interval '5 minutes', 5), id, u
                from ids""", ([user for user, _, _ in users],)).fetchall()}
        expected.update(requests)  # before any ping line is read: no await since the insert
        while len(pinged) < len(users):
            if any(worker.returncode is not None for worker in workers):
                raise RuntimeError(f"storm from {where}: a phone process exited")
            await asyncio.sleep(0.05)
        killed = time.monotonic()
        relay.stop()
        stopped = time.monotonic() - killed
        pinged.clear()
        postgres_cpu = postgres_cpu_seconds()
        progress(f"storm from {where}: the instance stopped {stopped:.1f} s after SIGTERM, {len(requests):,} pings pending")
        sampler = ActivitySampler()
        sampler.start()
        relay.start()
        since, hellos = relay.started, 0  # from now on only the restarted instance's hellos and pings count
        await relay.ready()
        ready = time.monotonic() - relay.started
        deadline = time.monotonic() + 120
        with psycopg.connect(RELAY_URL, autocommit=True) as conn:
            while len(pinged) < len(users) and time.monotonic() < deadline:
                conn.execute("select relay.heartbeat('bench-waiter')")  # so that no reaper abandons the requests
                await asyncio.sleep(0.05)
        # The restarted relay's CPU since it started, Postgres's since the old instance stopped.
        relay_cpu, postgres_cpu = cpu_seconds([relay.process.pid]), postgres_cpu_seconds() - postgres_cpu
        sampler.stop()
        if postgres_cpu > 3 or len(pinged) < len(users):
            progress(f"storm from {where}: Postgres busiest with (samples every 0.1 s) {sampler.top()}")
        if len(pinged) < len(users):
            explain_misses(requests, pinged, phones)
            connected = await relay.metric("whereabot_device_connections")
            raise RuntimeError(f"reconnect storm from {where}: only {len(pinged)} of {len(users)} phones got their ping"
                               f" in 120 s ({hellos} hellos since the restart, {connected:.0f} connected)")
        done = time.monotonic()
        arrivals = sorted(pinged.values())
        upgrades = sorted(state["hello_at"] for state in phones.values())
        progress(f"storm from {where}: ready {ready:.1f} s after the start; sockets open at " +
                 ", ".join(f"{q:.0%} {percentile(upgrades, q):.1f} s" for q in (0.01, 0.5, 0.9, 0.99, 1.0)) + "; pings at " +
                 ", ".join(f"{q:.0%} {percentile(arrivals, q):.1f} s" for q in (0.01, 0.5, 0.9, 0.99, 1.0)) +
                 f"; CPU: relay {relay_cpu:.1f} s, Postgres {postgres_cpu:.1f} s; listen queue overflows {listen_overflows() - overflows}")
        # Registering the waiter again abandons this run's requests (every phone got its ping), so
        # that the next run's phones find none of them pending when they connect.
        with psycopg.connect(RELAY_URL, autocommit=True) as conn:
            conn.execute("select relay.register_instance('bench-waiter')")
    finally:
        for worker in workers:
            worker.stdin.close()
        for worker in workers:
            await worker.wait()
        await asyncio.gather(*readers, return_exceptions=True)
    return {"since_kill": done - killed, "since_start": done - relay.started, "hellos": hellos, "ready": ready,
            "median": percentile(arrivals, 0.5), "relay_cpu": relay_cpu, "postgres_cpu": postgres_cpu}


def listen_overflows():
    """The kernel's count of connections dropped because a listen queue was full (a dropped
    SYN is retried by the client after 1, 3, 7 s: a storm would stretch by that much)."""
    for line in pathlib.Path("/proc/net/netstat").read_text().splitlines():
        if line.startswith("TcpExt:") and "ListenOverflows" in line:
            names = line.split()
        elif line.startswith("TcpExt:"):
            return int(line.split()[names.index("ListenOverflows")])
    return 0


def explain_misses(requests, pinged, phones):
    """For each phone whose ping did not arrive: its socket, its last hello, its
    relay.connections rows and its request — so that a miss explains itself."""
    missed = [(request, user) for request, user in requests.items() if str(request) not in pinged]
    with psycopg.connect(ADMIN_URL, autocommit=True) as conn:
        for request, user in missed[:20]:
            rows = conn.execute("select instance_id, opened_at, connected_at from relay.connections where user_id = %s",
                                (user,)).fetchall()
            state = conn.execute("select settled_at is not null, outcome, delivered_at is not null, expires_at > now()"
                                 " from relay.pending_requests where id = %s", (request,)).fetchone()
            print(f"storm miss: user {user}: last hello {phones[str(user)]['hello_at']} s after the start;"
                  f" relay.connections {rows or 'none'}; request {request} (settled, outcome, delivered, live) = {state}",
                  file=sys.stderr)
    print(f"storm: {len(missed)} of {len(requests)} phones missed their ping; client errors: {CLIENT_ERRORS[:3]}",
          file=sys.stderr)


async def main():
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    if "durable" in PARTS or UPROBES:
        enable_function_stats(ADMIN_URL)
    relays = [Relay("bench-relay-1", 18191), Relay("bench-relay-2", 18192)]
    for relay in relays:
        relay.start()
    for relay in relays:
        await relay.ready()
    rows = []
    try:
        if "latency" in PARTS:
            await latency_rows(relays, rows)
        if "throughput" in PARTS:
            await throughput_rows(relays, rows)
        if "durable" in PARTS:
            await durable_rows(relays, rows, make_users, phone, ADMIN_URL, progress)
        if "memory" in PARTS or "storm" in PARTS:
            await phone_rows(relays, rows)
    finally:
        for relay in relays:
            if relay.process.poll() is None:
                relay.stop()
    print_table(rows)


async def latency_rows(relays, rows):
    progress("1. latency")
    (_, phone_token, agent_token), = make_users(1)
    same = await asyncio.to_thread(run_load, [(relays[0].port, relays[0].port, agent_token, phone_token)], None, SAMPLES)
    cross = await asyncio.to_thread(run_load, [(relays[1].port, relays[0].port, agent_token, phone_token)], None, SAMPLES)
    echo = await echo_latencies(SAMPLES)
    notify = notify_latencies(SAMPLES)
    floor50 = echo["p50_ms"] + statistics.median(notify)
    floor99 = echo["p99_ms"] + percentile(notify, 0.99)
    for name, result in (("same instance", same), ("cross instance", cross)):
        rows.append((f"locate latency, {name}", f"p50 {result['p50_ms']:.2f} ms, p99 {result['p99_ms']:.2f} ms",
                     f"{result['p50_ms'] / floor50:.1f}x floor p50"))
    rows.append(("floor: WebSocket echo + NOTIFY", f"p50 {floor50:.2f} ms, p99 {floor99:.2f} ms",
                 f"echo p50 {echo['p50_ms']:.2f} + NOTIFY p50 {statistics.median(notify):.2f} ms"))


async def throughput_rows(relays, rows):
    progress("2. throughput")
    ceiling = pgbench_notify_ceiling(AGENTS, min(SECONDS, 5))
    await throughput_table(relays, rows, ceiling)
    # The same table at 4 instances: two more join the two running ones.
    more = [Relay(f"bench-relay-{i}", 18190 + i) for i in (3, 4)]
    for relay in more:
        relay.start()
    try:
        for relay in more:
            await relay.ready()
        await throughput_table(relays + more, rows, ceiling)
    finally:
        for relay in more:
            relay.stop()
    progress("2b. notifications per locate")
    for count in (2, 4, 8):
        per_locate, failures = await notifications_per_locate(count, make_users(4))
        rows.append((f"notifications per locate, {count} instances", f"{per_locate:.2f} ({failures} failed)",
                     "cross instance; summed over every instance's LISTEN"))


async def throughput_table(relays, rows, ceiling):
    """The throughput rows (same and cross instance) with `relays` serving phones and agents."""
    for cross in (False, True):
        run = await throughput(relays, make_users(AGENTS), SECONDS, cross)
        where = "cross instance" if cross else "same instance"
        cpu = run["cpu"]
        rows.append((f"locates/s, {where}, {AGENTS} agents, {len(relays)} instances",
                     f"{run['rate']:,.0f}/s ({run['failed']} failed), p50 {run['p50']:.2f} ms, p99 {run['p99']:.2f} ms",
                     f"{run['rate'] / ceiling:.2f} of pgbench NOTIFY-only {ceiling:,.0f} tps; CPU ms per locate:"
                     f" relays {cpu['relays']:.2f}, Postgres {cpu['postgres']:.2f}, client {cpu['client']:.2f};"
                     f" relays' thread wake-ups {run['switches']:.1f};"
                     f" WAL {run['wal']:,.0f} bytes per locate"))
        if UPROBES:
            # A run of its own: each probe's trap costs microseconds, which the rows above must not pay.
            counted = await throughput(relays, make_users(AGENTS), SECONDS, cross, counting=True)
            rows.append((f"calls per locate, {where}", ", ".join(f"{name} {count:.1f}" for name, count in counted["uprobes"].items()),
                         "relays, uprobes (BENCH_UPROBES=1), in a run of its own"))
            rows.append((f"Postgres functions per locate, {where}", f"{counted['functions_us']:.0f} µs self time",
                         "; ".join(f"{name} {calls:.2f}x {us:.1f} µs" for name, calls, us in counted["functions"][:6])
                         + " (pg_stat_user_functions, same run)"))


async def phone_rows(relays, rows):
    progress("3. memory per idle phone")
    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    holder = relays[1]
    holder.stop()
    holder.start()
    await holder.ready()
    await asyncio.sleep(0.5)
    before = rss_kib(holder.process.pid)
    heap_before = await holder.metric("whereabot_heap_in_use_bytes")
    users = make_users(PHONES)
    started = time.monotonic()
    phones = await connect_many(holder.port, users, None, answer=False)
    await metric_reaches(holder, "whereabot_device_connections", PHONES, 120, "idle phones")
    connected = time.monotonic() - started
    await asyncio.sleep(2)
    after = rss_kib(holder.process.pid)
    rows.append((f"memory per idle phone at {PHONES:,}", f"{(after - before) * 1024 / PHONES:,.0f} bytes",
                 f"RSS {before / 1024:.1f} -> {after / 1024:.1f} MiB; all said hello in {connected:.1f} s"))
    # The same phones once a maintenance beat (5 s) has passed: what an idle instance keeps.
    await asyncio.sleep(6)
    settled = rss_kib(holder.process.pid)
    heap = await holder.metric("whereabot_heap_in_use_bytes")  # 0 from a relay without the gauge
    rows.append((f"memory per idle phone at {PHONES:,}, a beat later", f"{(settled - before) * 1024 / PHONES:,.0f} bytes",
                 f"RSS {settled / 1024:.1f} MiB; live heap {(heap - heap_before) / PHONES:,.0f} bytes per phone"
                 if heap else f"RSS {settled / 1024:.1f} MiB; this relay has no heap gauge"))
    rows.append(await idle_wal_row(holder))
    # As many more as this machine's open-files limit allows, up to 50,000.
    most = min(50_000, hard - 2_000)
    if most > PHONES:
        more_users = make_users(most - PHONES)
        phones += await connect_many(holder.port, more_users, None, answer=False)
        await metric_reaches(holder, "whereabot_device_connections", most, 120, "more idle phones")
        await asyncio.sleep(2)
        largest = rss_kib(holder.process.pid)
        rows.append((f"memory per idle phone at {most:,}", f"{(largest - before) * 1024 / most:,.0f} bytes",
                     f"RSS {before / 1024:.1f} -> {largest / 1024:.1f} MiB"))
        await asyncio.sleep(6)  # a maintenance beat later, as at PHONES
        largest = rss_kib(holder.process.pid)
        heap = await holder.metric("whereabot_heap_in_use_bytes")
        rows.append((f"memory per idle phone at {most:,}, a beat later", f"{(largest - before) * 1024 / most:,.0f} bytes",
                     f"RSS {largest / 1024:.1f} MiB; live heap {(heap - heap_before) / most:,.0f} bytes per phone"
                     if heap else f"RSS {largest / 1024:.1f} MiB; this relay has no heap gauge"))
    if most < 50_000:
        rows.append(("memory per idle phone at 50,000", "not measured",
                     f"the open-files hard limit here is {hard:,} per process"))
    for socket, task in phones:
        socket.close()
        task.cancel()
    await asyncio.sleep(1)

    # 4. reconnect storm, once for each count of source addresses (BENCH_STORM_ADDRESSES)
    for addresses in STORM_ADDRESSES:
        where = addresses_text(min(addresses, len(users)))
        progress(f"4. reconnect storm, {len(users):,} phones from {where}")
        result = await storm(holder, users, addresses)
        rows.append((f"reconnect storm, {len(users):,} phones from {where}",
                     f"{result['since_start']:.1f} s after the restarted instance started",
                     f"{result['since_kill']:.1f} s after SIGTERM; every phone said hello and got its pending ping"
                     f" (half by {result['median']:.1f} s; ready at {result['ready']:.1f} s; CPU s: relay {result['relay_cpu']:.1f},"
                     f" Postgres {result['postgres_cpu']:.1f}; phones back off as the app does)"))
    if CLIENT_ERRORS:
        rows.append(("bench client errors", f"{len(CLIENT_ERRORS)}", CLIENT_ERRORS[0][:80]))


async def idle_wal_row(holder, window=20):
    """WAL per idle phone per minute: what `window` seconds of beats write, per minute, plus
    the 5-minute last_seen_at refresh amortized (forced once here, and measured over a beat).
    A VACUUM ANALYZE first does the work autovacuum would do after the phones' hellos."""
    with psycopg.connect(ADMIN_URL, autocommit=True) as connection:
        connection.execute("vacuum analyze")
    start = wal_bytes()
    await asyncio.sleep(window)
    beats = (wal_bytes() - start) * 60 / window
    with psycopg.connect(ADMIN_URL, autocommit=True) as connection:
        if not connection.execute("select exists (select from information_schema.columns where table_schema = 'relay'"
                                  " and table_name = 'instances' and column_name = 'seen_refreshed_at')").fetchone()[0]:
            # A schema from before the 5-minute refresh (a "before" run): each beat rewrote the
            # rows older than 30 s, so a row was rewritten every 30-35 s (forced here once).
            connection.execute("update public.devices set last_seen_at = now() - interval '31 seconds'")
            start = wal_bytes()
            await asyncio.sleep(6)
            refresh = wal_bytes() - start
            per_minute = (beats + refresh * 60 / 32.5) / PHONES
            return (f"WAL per idle phone per minute at {PHONES:,}", f"{per_minute:,.1f} bytes",
                    f"beats {beats / PHONES:,.1f} B/min over {window} s, + the last_seen_at refresh"
                    f" ({refresh / PHONES:,.0f} B per phone) every 30-35 s (this schema's)")
        connection.execute("update public.devices set last_seen_at = now() - interval '6 minutes'")
        start = wal_bytes()
        connection.execute("update relay.instances set seen_refreshed_at = now() - interval '6 minutes' where id = %s",
                           (holder.name,))
        await asyncio.sleep(6)  # one beat (5 s) refreshes every row
        refresh = wal_bytes() - start
        stale = connection.execute("select count(*) from public.devices d join relay.connections c on c.device_id = d.id"
                                   " where d.last_seen_at < now() - interval '5 minutes'").fetchone()[0]
    per_minute = (beats + refresh / 5) / PHONES
    return (f"WAL per idle phone per minute at {PHONES:,}", f"{per_minute:,.1f} bytes",
            f"beats {beats / PHONES:,.1f} B/min over {window} s, + the 5-minute last_seen_at refresh"
            f" ({refresh / PHONES:,.0f} B per phone) / 5; {stale} connected devices left unrefreshed")


def print_table(rows, title=None):
    """Prints `rows` (measure, result, beside) under `title` as the benchmark tables are."""
    print(title or f"Relay benchmark (release build, 2 instances, loopback, {os.cpu_count()} cores shared by client, relays"
                   f" and Postgres; {SAMPLES} sequential locates per latency row)")
    width = max(len(row[0]) for row in rows) + 2
    value_width = max(len(row[1]) for row in rows) + 2
    print(f"{'measure':<{width}}{'result':<{value_width}}beside")
    for name, value, beside in rows:
        print(f"{name:<{width}}{value:<{value_width}}{beside}")


if __name__ == "__main__":
    import uvloop  # the phones' event loop in C: 10,000 phones in one process measure the relay, not asyncio
    uvloop.run(main())
