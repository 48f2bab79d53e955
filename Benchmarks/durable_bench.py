"""Durable requests (docs/protocol.md, "Durable requests") in `make bench-relay`: what a poll
adds (tasks/get on a settled task, p50/p99), and what a durable request costs Postgres beside a
synchronous one (relay.* calls and their time per request, from pg_stat_user_functions, with
track_functions on for the benchmark's database)."""
import asyncio
import http.client
import json
import statistics
import time

import psycopg

REQUESTS = 200


def enable_function_stats(admin_url):
    """Turns on per-function statistics for the benchmark's database (new sessions)."""
    with psycopg.connect(admin_url, autocommit=True) as conn:
        database = conn.execute("select current_database()").fetchone()[0]
        conn.execute(f'alter database "{database}" set track_functions = \'pl\'')


def function_totals(admin_url):
    """(calls, milliseconds) of every relay.* and private.* function so far (top level and nested)."""
    time.sleep(11)  # an idle backend flushes its statistics within 10 s (PostgreSQL 15)
    with psycopg.connect(admin_url) as conn:
        row = conn.execute("select coalesce(sum(calls), 0), coalesce(sum(self_time), 0) from pg_stat_user_functions"
                           " where schemaname in ('relay', 'private')").fetchone()
        top = conn.execute("select coalesce(sum(calls), 0) from pg_stat_user_functions where schemaname = 'relay'").fetchone()[0]
    return int(row[0]), float(row[1]), int(top)


class Agent:
    """One keep-alive HTTP connection to a relay, as an agent's client holds it."""

    def __init__(self, port, agent_token):
        self.connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        self.headers = {"Authorization": "Bearer " + agent_token}

    def call(self, method, path, headers=None, body=None):
        self.connection.request(method, path, body=body, headers={**self.headers, **(headers or {})})
        response = self.connection.getresponse()
        return response.status, dict(response.getheaders()), response.read()

    def mcp(self, method, params):
        body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": method, "params": params})
        status, _, data = self.call("POST", "/mcp", {"Content-Type": "application/json", "Accept": "application/json",
                                                      "MCP-Protocol-Version": "2025-11-25"}, body)
        assert status == 200, data
        return json.loads(data)


def cost(admin_url, run):
    before = function_totals(admin_url)
    started = time.monotonic()
    run()
    elapsed = time.monotonic() - started
    after = function_totals(admin_url)
    return ((after[2] - before[2]) / REQUESTS, (after[0] - before[0]) / REQUESTS,
            (after[1] - before[1]) / REQUESTS, elapsed * 1000 / REQUESTS)


async def durable_rows(relays, rows, make_users, phone, admin_url, progress):
    progress("5. durable requests")
    (_, phone_token, agent_token), = make_users(1)
    socket, task = await phone(relays[0].port, phone_token)
    await asyncio.sleep(0.5)
    agent = Agent(relays[0].port, agent_token)

    def synchronous():
        for _ in range(REQUESTS):
            status, _, body = agent.call("POST", "/v1/locate?timeout_secs=10")
            assert status == 200, body

    def durable():
        for _ in range(REQUESTS):
            status, headers, body = agent.call("POST", "/v1/locate?timeout_secs=10", {"Prefer": "respond-async"})
            assert status == 202, body
            status, _, body = agent.call("GET", headers["Location"] + "?wait_secs=10")
            assert status == 200, body

    sync_cost = await asyncio.to_thread(cost, admin_url, synchronous)
    durable_cost = await asyncio.to_thread(cost, admin_url, durable)
    rows.append(("Postgres per request, durable (async HTTP)",
                 f"{durable_cost[0]:.1f} relay.* calls, {durable_cost[1]:.1f} function calls, {durable_cost[2]:.3f} ms",
                 f"synchronous: {sync_cost[0]:.1f} relay.* calls, {sync_cost[1]:.1f} function calls, {sync_cost[2]:.3f} ms"
                 f" (nested calls counted; time is the functions' own);"
                 f" wall per request {durable_cost[3]:.2f} vs {sync_cost[3]:.2f} ms"))

    def polls():
        ids = []
        for _ in range(100):
            created = agent.mcp("tools/call", {"name": "get_phone_location", "arguments": {}, "task": {"ttl": 60_000}})
            task_id = created["result"]["task"]["taskId"]
            result = agent.mcp("tasks/result", {"taskId": task_id})["result"]
            assert not result["isError"], result
            ids.append(task_id)
        samples = []
        for _ in range(3):  # rounds a second apart: within the limit of 2 polls a second per task
            time.sleep(1.1)
            for task_id in ids:
                started = time.perf_counter()
                got = agent.mcp("tasks/get", {"taskId": task_id})["result"]
                samples.append((time.perf_counter() - started) * 1000)
                assert got["status"] == "completed", got
        return sorted(samples)

    samples = await asyncio.to_thread(polls)
    rows.append(("tasks/get on a settled task", f"p50 {statistics.median(samples):.2f} ms, p99 {samples[int(len(samples) * 0.99) - 1]:.2f} ms",
                 f"{len(samples)} polls over one keep-alive connection (2025-11-25 form)"))
    socket.close()
    task.cancel()
