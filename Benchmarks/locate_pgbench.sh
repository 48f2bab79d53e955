#!/usr/bin/env bash
# What a same-instance locate costs Postgres, call by call: single-client pgbenches on a
# fresh whereabot_bench database (the user and phone of Benchmarks/sql/batch_cycle.sql) of a round trip that does
# nothing (`select 1`), and of a locate's calls: a request id, relay.open_request, then
# relay.settle of its fix kept on the waiter's instance — each a transaction of its own, as
# the relay makes them (three round trips). Compare with `make bench-relay`'s locate p50.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
source "$here/scripts/lib.sh"
(cd "$here" && TEST_DB=whereabot_bench scripts/db.sh reset-test >/dev/null)
url=$(relay_url whereabot_bench)
psql -XAtq -v ON_ERROR_STOP=1 "$(admin_url whereabot_bench)" -f "$here/Benchmarks/sql/batch_cycle.sql" >/dev/null
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
echo "select 1;" >"$dir/nothing.sql"
cat >"$dir/cycle.sql" <<SQL
select gen_random_uuid() as id \gset
select relay.open_request(':id'::uuid, '00000000-0000-4000-8000-0000000000e1', null, 'claude', 'Claude', 'relay-one', decode(repeat('A', 43) || '=', 'base64'), now() + interval '5 minutes', 100);
select relay.settle(':id'::uuid, '00000000-0000-4000-8000-0000000000e1', '00000000-0000-4000-8000-0000000000e4', 'location', null, null, 'relay-one');
SQL
for script in nothing cycle; do
  printf '%-8s ' "$script"
  pgbench -n -c1 -T"${SECONDS_PER_RUN:-10}" -f "$dir/$script.sql" "$url" 2>&1 | grep -E "latency average" | tr -d '\n'
  echo
done
