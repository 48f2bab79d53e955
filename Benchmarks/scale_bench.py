"""`make bench-scale`: the curves behind docs/scaling.md, measured on this machine.

  1. NOTIFY throughput (pgbench, 8 clients, one addressed channel) while 1, 8, 32 and 128
     other connections LISTEN on channels of their own — as relay instances do: in
     PostgreSQL every listening backend is signalled for every NOTIFY of the database.
  2. The database's per-instance upkeep against the sockets it holds (rows in
     relay.connections, written directly, so no open-files limit applies): one heartbeat
     (relay.heartbeat + relay.revoked_connections + relay.pending_locates_on, what the
     relay calls every 5 s) at 0, 10,000, 50,000 and 100,000 sockets; the re-registration
     of 10,000 sockets in calls of 1,000 (relay.device_hellos); one open_request for a user
     among them (the hot path must not grow with the sockets).
  3. A real relay holding idle phones: its CPU per idle phone per second and Postgres's,
     over 20 s, at BENCH_PHONES (default 10,000) phones.

usage: scale_bench.py  (environment: BENCH_ADMIN_URL, BENCH_RELAY_URL, BENCH_PHONES)
"""
import asyncio
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid

import psycopg

import relay_bench as rb

ADMIN_URL = os.environ["BENCH_ADMIN_URL"]
RELAY_URL = os.environ["BENCH_RELAY_URL"]
PHONES = int(os.environ.get("BENCH_PHONES", "10000"))


def notify_throughput(listeners, seconds=4):
    """pgbench NOTIFY tps on one channel (consumed by one listener) while `listeners`
    other connections LISTEN on channels of their own."""
    stop = threading.Event()
    idle = [psycopg.connect(ADMIN_URL, autocommit=True) for _ in range(listeners)]
    for index, conn in enumerate(idle):
        conn.execute(f'listen "whereabot_scale_idle_{index}"')
    consumer = psycopg.connect(ADMIN_URL, autocommit=True)
    consumer.execute('listen "whereabot_scale_target"')
    received = [0]

    def consume():
        while not stop.is_set():
            received[0] += sum(1 for _ in consumer.notifies(timeout=0.2))

    thread = threading.Thread(target=consume)
    thread.start()
    with tempfile.NamedTemporaryFile("w", suffix=".sql", delete=False) as script:
        script.write("select pg_notify('whereabot_scale_target', '" + "x" * 200 + "');\n")
    try:
        output = subprocess.run(["pgbench", "-n", "-c", "8", "-j", "2", "-T", str(seconds), "-M", "extended",
                                 "-f", script.name, ADMIN_URL], capture_output=True, text=True, check=True).stdout
    finally:
        os.unlink(script.name)
        stop.set()
        thread.join()
        for conn in idle + [consumer]:
            conn.close()
    return next(float(line.split()[2]) for line in output.splitlines() if line.startswith("tps = "))


def timed(conn, sql, params=(), repeat=5):
    """Median milliseconds of `sql` over `repeat` runs (each in its own transaction)."""
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        conn.execute(sql, params).fetchall()
        times.append((time.perf_counter() - started) * 1000)
    return statistics.median(times)


def upkeep_rows(rows):
    """Per-instance database upkeep against the sockets it holds."""
    with psycopg.connect(ADMIN_URL, autocommit=True) as admin, psycopg.connect(RELAY_URL, autocommit=True) as relay:
        for sockets in (0, 10_000, 50_000, 100_000):
            instance = f"scale-{sockets}"
            users = rb.make_users(max(100, sockets // 40))  # 40 devices each (the table allows 50)
            relay.execute("select relay.register_instance(%s)", (instance,))
            # Sockets of real users (sessions alive, devices known).
            admin.execute("""
                insert into public.devices (id, user_id, platform, last_seen_at)
                select gen_random_uuid(), (%s::uuid[])[1 + i %% %s], 'ios', now() from generate_series(1, %s) i""",
                          ([u for u, _, _ in users], len(users), sockets))
            admin.execute("""
                insert into relay.connections (id, instance_id, user_id, device_id, platform, session_id, opened_at)
                select gen_random_uuid(), %s, d.user_id, d.id, 'ios', s.id, now()
                from public.devices d join auth.sessions s on s.user_id = d.user_id
                where d.user_id = any(%s::uuid[]) and not exists (select from relay.connections c where c.device_id = d.id)
                limit %s""", (instance, [u for u, _, _ in users], sockets))
            admin.execute("analyze relay.connections")
            beat = timed(relay, "select relay.heartbeat(%s), (select count(*) from relay.revoked_connections(%s)),"
                                " (select count(*) from relay.pending_locates_on(%s))", (instance, instance, instance))
            locate = timed(relay, """select relay.open_request(gen_random_uuid(), %s, null, 'c', null, %s,
                                            decode(repeat('ab', 32), 'hex'), now() + interval '1 minute', 100)""",
                           (users[0][0], instance), repeat=20)
            per_socket = f"{beat / sockets * 1000 / 5:.2f} µs of Postgres per socket per second at one beat per 5 s; " \
                if sockets else ""
            rows.append((f"heartbeat of an instance with {sockets:,} sockets", f"{beat:.1f} ms",
                         per_socket + f"open_request for a user among them {locate:.2f} ms"))
            admin.execute("delete from relay.pending_requests where waiter_instance = %s", (instance,))
            admin.execute("delete from relay.instances where id = %s", (instance,))
        # Re-registration: 10,000 hellos in calls of 1,000.
        users = rb.make_users(1000)
        relay.execute("select relay.register_instance('scale-rereg')")
        hellos = [{"connection": str(uuid.uuid4()), "user": str(u), "session": None, "device": str(uuid.uuid4()),
                   "name": "Phone", "platform": "ios", "app_version": None, "opened_at": "2026-11-30T00:00:00Z"}
                  for u, _, _ in users]
        sessions = dict(admin.execute("select user_id, id from auth.sessions where user_id = any(%s)",
                                      ([u for u, _, _ in users],)).fetchall())
        for hello in hellos:
            hello["session"] = str(sessions[uuid.UUID(hello["user"])])
        started = time.perf_counter()
        for _ in range(10):
            for hello in hellos:
                hello["connection"] = str(uuid.uuid4())
            relay.execute("select relay.device_hellos('scale-rereg', %s::jsonb)", (json.dumps(hellos),))
        elapsed = time.perf_counter() - started
        rows.append(("re-registration of 10,000 sockets", f"{elapsed:.2f} s",
                     f"{elapsed / 10_000 * 1e6:.0f} µs per socket, in 10 calls of relay.device_hellos"))
        admin.execute("delete from relay.instances where id like 'scale-%'")


async def idle_rows(rows):
    """A relay with PHONES idle phones: CPU per phone per second, its own and Postgres's."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    relay = rb.Relay("scale-relay", 18195)
    relay.start()
    await relay.ready()
    phones = await rb.connect_many(relay.port, rb.make_users(PHONES), None, answer=False)
    await rb.metric_reaches(relay, "whereabot_device_connections", PHONES, 120, "idle phones")
    await asyncio.sleep(2)
    seconds = 20
    relay_before, postgres_before = rb.cpu_seconds([relay.process.pid]), rb.postgres_cpu_seconds()
    await asyncio.sleep(seconds)
    relay_cpu = rb.cpu_seconds([relay.process.pid]) - relay_before
    postgres_cpu = rb.postgres_cpu_seconds() - postgres_before
    rows.append((f"idle phones: relay CPU, {PHONES:,} phones", f"{relay_cpu / seconds / PHONES * 1e6:.2f} µs per phone per second",
                 f"{relay_cpu:.2f} s in {seconds} s (keep-alive pings, sweeps, heartbeats)"))
    rows.append((f"idle phones: Postgres CPU, {PHONES:,} phones", f"{postgres_cpu / seconds / PHONES * 1e6:.2f} µs per phone per second",
                 f"{postgres_cpu:.2f} s in {seconds} s"))
    for socket, task in phones:
        socket.close()
        task.cancel()
    relay.stop()


def main():
    rows = []
    rb.progress("1. NOTIFY throughput against listening connections")
    for listeners in (1, 8, 32, 128):
        tps = notify_throughput(listeners)
        rows.append((f"NOTIFY/s with {listeners} other listeners", f"{tps:,.0f}/s", "pgbench, 8 clients, 200-byte payload"))
    rb.progress("2. per-instance upkeep against its sockets")
    upkeep_rows(rows)
    rb.progress("3. idle phones")
    import uvloop
    uvloop.run(idle_rows(rows))
    rb.print_table(rows, f"Scale benchmark ({os.cpu_count()} cores shared by client, relay and Postgres)")


if __name__ == "__main__":
    sys.exit(main())
