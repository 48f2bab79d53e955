#!/usr/bin/env bash
# `make bench-pgbus`: pgbench baselines, then PGBus's own numbers beside them.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
cd "$ROOT"

url=$(admin_url)
seconds=${BENCH_SECONDS:-5}
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT

# Runs a one-statement pgbench script on one client (extended protocol, as PGBus uses)
# and prints "latency_ms tps".
baseline() {
  echo "$1" >"$dir/script.sql"
  pgbench -n -c 1 -T "$seconds" -M extended -f "$dir/script.sql" "$url" 2>/dev/null </dev/null \
    | awk '/^latency average = / {latency = $4} /^tps = / {tps = $3} END {print latency, tps}'
}

read -r query_ms query_tps <<<"$(baseline 'select 1;')"
read -r notify_ms notify_tps <<<"$(baseline "select pg_notify('pgbus_bench_baseline', 'x');")"

swift build -c release --product pgbus-bench >/dev/null
BENCH_DATABASE_URL=$url BENCH_SECONDS=$seconds \
  BASELINE_QUERY_MS=$query_ms BASELINE_NOTIFY_MS=$notify_ms BASELINE_NOTIFY_TPS=$notify_tps \
  .build/release/pgbus-bench
