#!/usr/bin/env bash
# A single-client pgbench of the batched calls (Benchmarks/sql/batch_cycle.sql: five opens
# and five settles a cycle) on a fresh whereabot_bench database migrated from TREE's
# migrations (default: this checkout) — to compare the SQL of two commits per call:
#   git worktree add /tmp/before <commit>; Benchmarks/batch_pgbench.sh /tmp/before; Benchmarks/batch_pgbench.sh
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
tree=${1:-$here}
source "$here/scripts/lib.sh"
(cd "$tree" && LOCAL_DIR="$here/.local" TEST_DB=whereabot_bench scripts/db.sh reset-test >/dev/null)
url=$(admin_url whereabot_bench)
psql -XAtq -v ON_ERROR_STOP=1 "$url" -f "$here/Benchmarks/sql/batch_cycle.sql" >/dev/null
script=$(mktemp)
trap 'rm -f "$script"' EXIT
echo "select public.bench_cycle();" >"$script"
pgbench -n -c1 -T"${SECONDS_PER_RUN:-20}" -f "$script" "$url" 2>&1 | grep -E "^tps|latency average"
