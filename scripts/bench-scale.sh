#!/usr/bin/env bash
# `make bench-scale`: the curves behind docs/scaling.md (Benchmarks/scale_bench.py) — NOTIFY
# throughput against listening connections, an instance's database upkeep against its
# sockets, and a relay's CPU per idle phone — on a database of their own.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
cd "$ROOT"

swift build -c release --product whereabot >/dev/null
TEST_DB=whereabot_bench scripts/db.sh reset-test
cd Benchmarks
BENCH_ADMIN_URL=$(admin_url whereabot_bench) BENCH_RELAY_URL=$(relay_url whereabot_bench) \
  "$ROOT/.venv/bin/python" scale_bench.py
