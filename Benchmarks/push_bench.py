"""`make bench-push`: push numbers, printed as one table (asserts nothing).

1. APNs pushes/s through one libcurl multi handle (HTTP/2 streams on one connection) to the
   fake APNs, by the release `push-bench` (the fake, in Python, is the likely ceiling).
2. The added latency of push: from an agent's POST /v1/locate (no device connected) to the
   fake APNs receiving the wake alert, through a release `whereabot serve`."""
import json
import os
import pathlib
import statistics
import subprocess
import sys
import time
import uuid

import psycopg

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "Tests" / "Acceptance"))
os.environ.setdefault("WHEREABOT_TEST_RELAY_URL", os.environ["BENCH_RELAY_URL"])
import relay_server  # noqa: E402
from push_kit import KEY_ID, TEAM_ID, TOPIC, Locate, Push, hex_token, wait_for  # noqa: E402

ADMIN_URL = os.environ["BENCH_ADMIN_URL"]
RELAY_URL = os.environ["BENCH_RELAY_URL"]
relay_server.BINARY = ROOT / ".build" / "release" / "whereabot"


def throughput(fakes, count=2000, concurrency=100):
    binary = ROOT / ".build" / "release" / "push-bench"
    result = subprocess.run([str(binary), fakes.apns.url, fakes.env["PUSH_CA_FILE"], fakes.key_file, KEY_ID, TEAM_ID, TOPIC,
                             str(count), str(concurrency)], capture_output=True, text=True, timeout=300, check=True)
    return json.loads(result.stdout)


def wake_latencies(fakes, samples=20):
    relay = relay_server.RelayServer(DATABASE_URL=RELAY_URL, **fakes.env)
    latencies = []
    try:
        with psycopg.connect(ADMIN_URL, autocommit=True) as conn:
            for _ in range(samples):
                user, session = uuid.uuid4(), uuid.uuid4()
                email = f"{user.hex[:12]}@bench.example"
                conn.execute("insert into auth.users (id, aud, role, email, raw_user_meta_data, created_at, updated_at)"
                             " values (%s, 'authenticated', 'authenticated', %s, '{}', now(), now())", (user, email))
                conn.execute("insert into auth.sessions (id, user_id, created_at) values (%s, %s, now())", (session, user))
                push_token = hex_token()
                conn.execute("insert into public.push_tokens (token, user_id) values (%s, %s)", (push_token, user))
                call = Locate(relay.base, relay_server.token(user, session, email, client_id="bench-agent"), 4).begin()
                pushes = wait_for(lambda: fakes.apns_for([push_token]), 5)
                if pushes:
                    latencies.append((pushes[0]["time"] - call.started) * 1000)
                call.join()
    finally:
        relay.stop()
    return latencies


def main():
    fakes = Push()
    try:
        result = throughput(fakes)
        latencies = sorted(wake_latencies(fakes))
    finally:
        fakes.stop()
    rows = [
        ("APNs pushes/s, one instance to the fake APNs",
         f"{result['per_second']:.0f}/s ({result['sent']}/{result['count']} sent, 100 in flight)",
         f"{result['connections']} connection(s) opened"),
        ("call → wake push at the fake APNs (no device)",
         f"p50 {statistics.median(latencies):.1f} ms, p95 {latencies[int(len(latencies) * 0.95) - 1]:.1f} ms",
         f"{len(latencies)} samples; includes curl's start and the locate's open"),
    ]
    print(f"Push benchmark (release builds, loopback, {os.cpu_count()} cores shared by the fakes, relay and Postgres)")
    width = max(len(r[0]) for r in rows) + 2
    value_width = max(len(r[1]) for r in rows) + 2
    print(f"{'measure':<{width}}{'result':<{value_width}}beside")
    for name, value, beside in rows:
        print(f"{name:<{width}}{value:<{value_width}}{beside}")


if __name__ == "__main__":
    main()
