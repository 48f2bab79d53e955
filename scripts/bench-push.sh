#!/usr/bin/env bash
# `make bench-push`: push throughput through the transport (release push-bench) to the fake
# APNs, and the latency from an agent's call to the fake's receipt of the wake push through a
# release `whereabot serve` (Benchmarks/push_bench.py), against whereabot_bench.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
cd "$ROOT"

swift build -c release --product whereabot >/dev/null
swift build -c release --product push-bench >/dev/null
TEST_DB=whereabot_bench scripts/db.sh reset-test >/dev/null
BENCH_ADMIN_URL=$(admin_url whereabot_bench) BENCH_RELAY_URL=$(relay_url whereabot_bench) \
  "$ROOT/.venv/bin/python" Benchmarks/push_bench.py
