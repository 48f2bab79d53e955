#!/usr/bin/env bash
# `make bench-relay`: the relay end to end (Benchmarks/relay_bench.py) with release builds
# against a database of its own (whereabot_bench on the local cluster), printed as one table.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
cd "$ROOT"

swift build -c release --product whereabot >/dev/null
swift build -c release --product http-echo-server >/dev/null
swift build -c release --product locate-load >/dev/null
TEST_DB=whereabot_bench scripts/db.sh reset-test
BENCH_ADMIN_URL=$(admin_url whereabot_bench) BENCH_RELAY_URL=$(relay_url whereabot_bench) \
  "$ROOT/.venv/bin/python" Benchmarks/relay_bench.py
