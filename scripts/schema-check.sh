#!/usr/bin/env bash
# Checks that supabase/schemas/ (the current definition of every object) and
# supabase/migrations/ (the way a database gets there) build the same catalog.
#   scripts/schema-check.sh [all]     check, then self-check (what `make test-schemas` runs)
#   scripts/schema-check.sh check     shim + every migration in one fresh database, shim +
#                                     supabase/schemas/*.sql (in name order) in another; the
#                                     catalogs (scripts/schema-catalog.sql, less what the
#                                     shim alone creates) must be equal, else a unified diff
#   scripts/schema-check.sh self-check  shim + schemas in a third database; each deliberate
#                                     change below, made in a transaction and rolled back,
#                                     must show in the catalog (proves the check can fail)
#   scripts/schema-check.sh dump migrations|schemas   print one side's catalog
# Works on the cluster at PGHOST_LOCAL:PGPORT_LOCAL (scripts/lib.sh); its databases are
# named whereabot_schema_<pid>_* and dropped at exit, whatever happens.
set -euo pipefail
source "$(dirname "$0")/lib.sh"

mode=${1:-all}
case "$mode" in
  all | check | self-check) ;;
  dump) [[ ${2:-} =~ ^(migrations|schemas)$ ]] || die "usage: $0 dump migrations|schemas" ;;
  *) echo "usage: $0 [all|check|self-check|dump migrations|schemas]" >&2; exit 64 ;;
esac
pg_isready -q -h "$PGHOST_LOCAL" -p "$PGPORT_LOCAL" \
  || die "no PostgreSQL on $PGHOST_LOCAL:$PGPORT_LOCAL (run: make db)"
shopt -s nullglob
schema_files=("$ROOT"/supabase/schemas/*.sql)
[ ${#schema_files[@]} -gt 0 ] || die "no schema files in supabase/schemas"

prefix="whereabot_schema_$$"
work=$(mktemp -d)
databases=()
cleanup() {
  local db
  for db in "${databases[@]}"; do
    psql_strict "$(admin_url)" -c "drop database if exists $db with (force)" >/dev/null 2>&1 || true
  done
  rm -rf "$work"
}
trap cleanup EXIT

# A fresh database with the shim, named after the prefix and suffix $1, dropped at exit.
new_database() {
  local db="${prefix}_$1"
  databases+=("$db")
  fresh_database "$db"
}

# The schema files in name order, each in one transaction, as the migration role.
apply_schemas() {
  local file
  for file in "${schema_files[@]}"; do
    psql_strict "$(owner_url "$1")" -1 -f "$file" >/dev/null \
      || die "$(basename "$file") failed in database $1 (the error above gives its line)"
  done
}

# Database $1's catalog, sorted; extra psql arguments (-c ...) run before the query.
catalog() {
  local db=$1; shift
  psql -X -A -t -q -v ON_ERROR_STOP=1 "$(admin_url "$db")" "$@" -f "$ROOT/scripts/schema-catalog.sql" \
    | LC_ALL=C sort
}

# What our SQL made of catalog file $1: its lines the shim alone does not make, and the
# shim's lines it lost (a shim object changed or dropped).
ours() {
  LC_ALL=C comm -23 "$1" "$work/baseline"
  LC_ALL=C comm -13 "$1" "$work/baseline" | sed 's/^/shim object changed or gone: /'
}

build_baseline() {
  new_database baseline
  catalog "${prefix}_baseline" >"$work/baseline"
}

build_migrations() {
  new_database migrations
  apply_migrations "${prefix}_migrations"
  catalog "${prefix}_migrations" >"$work/migrations.full"
  ours "$work/migrations.full" >"$work/migrations"
}

build_schemas() {
  new_database schemas
  apply_schemas "${prefix}_schemas"
  catalog "${prefix}_schemas" >"$work/schemas.full"
  ours "$work/schemas.full" >"$work/schemas"
}

run_check() {
  build_migrations
  build_schemas
  if ! diff -u --label "supabase/migrations" --label "supabase/schemas" "$work/migrations" "$work/schemas" \
       >"$work/diff"; then
    cat "$work/diff" >&2
    echo "schema-check: supabase/schemas/ and supabase/migrations/ differ (above: - migrations, + schemas)" >&2
    echo "schema-check: a change is a new migration plus the same change in the schema file" >&2
    exit 1
  fi
  echo "schema-check: migrations and schemas agree ($(wc -l <"$work/schemas") catalog lines," \
    "${#schema_files[@]} schema files)"
}

# Deliberate changes, one per kind of fact the catalog holds; each must be found.
SELF_CHECKS=(
  "function body|create or replace function private.epoch_ms(p_time timestamptz) returns bigint language sql immutable set search_path = '' as \$\$ select (extract(epoch from p_time) * 1000)::bigint  \$\$"
  "function comment|comment on function relay.settle(uuid, uuid, uuid, text, text, text, text, int) is 'x'"
  "function setting|alter function relay.heartbeat(text) set enable_seqscan = off"
  "function volatility|alter function relay.reply_key(uuid, uuid) volatile"
  "function security|alter function relay.user_devices(uuid) security invoker"
  "function grant|grant execute on function relay.finish(uuid, text, text) to authenticated"
  "function revoke|revoke execute on function private.is_own_device(uuid) from authenticated"
  "function dropped|drop function relay.client_name(text)"
  "function added|create function private.extra() returns int language sql as 'select 1'"
  "table comment|comment on table public.devices is 'x'"
  "column comment|comment on column relay.pending_requests.reply_key is 'x'"
  "column default|alter table public.devices alter column name set default 'x'"
  "column not null|alter table public.agent_keys alter column last_used_at set not null"
  "column type|alter table relay.push_budgets alter column key type varchar(64)"
  "column added|alter table public.devices add column extra int"
  "column grant|grant update (name) on public.agent_keys to authenticated"
  "table grant|grant select on public.agent_keys to anon"
  "constraint|alter table public.devices drop constraint devices_name_check"
  "index|drop index relay.connections_session_id_idx"
  "index comment|comment on index relay.connections_device_id_idx is 'x'"
  "row level security|alter table relay.instances disable row level security"
  "forced row level security|alter table public.devices force row level security"
  "unlogged|alter table relay.push_budgets set logged"
  "storage options|alter table relay.connections set (fillfactor = 90)"
  "policy expression|alter policy \"Users can read their own devices from their own session\" on public.devices using (true)"
  "policy roles|alter policy \"Users can read their own devices from their own session\" on public.devices to authenticated, anon"
  "trigger|drop trigger devices_notify_revoked on public.devices"
  "trigger disabled|alter table public.location_shares disable trigger location_shares_end"
  "trigger on a shim table|drop trigger whereabot_claim_waiting_shares on auth.users"
  "shim object|alter function auth.uid() strict"
  "schema grant|grant usage on schema relay to authenticated"
  "schema comment|comment on schema relay is 'x'"
  "default privileges|alter default privileges for role postgres in schema relay grant execute on functions to authenticated"
  "type|alter type private.socket_hello add attribute extra int"
  "view|create view public.extra as select 1 as one"
  "sequence|create sequence relay.extra"
)

run_self_check() {
  local db="${prefix}_selfcheck" entry name change missed=()
  new_database selfcheck
  apply_schemas "$db"
  catalog "$db" >"$work/selfcheck.full"
  ours "$work/selfcheck.full" >"$work/selfcheck"
  if [ -f "$work/schemas" ] && ! cmp -s "$work/schemas" "$work/selfcheck"; then
    diff -u "$work/schemas" "$work/selfcheck" >&2 || true
    die "self-check: two databases built from the same schema files print different catalogs"
  fi
  for entry in "${SELF_CHECKS[@]}"; do
    name=${entry%%|*}
    change=${entry#*|}
    catalog "$db" -c "begin" -c "$change" >"$work/changed.full" \
      || die "self-check: the deliberate change '$name' failed: $change"
    ours "$work/changed.full" >"$work/changed"
    if cmp -s "$work/selfcheck" "$work/changed"; then missed+=("$name"); fi
  done
  if [ ${#missed[@]} -gt 0 ]; then
    die "self-check: the catalog did not show these deliberate changes: ${missed[*]}"
  fi
  echo "schema-check: self-check found each of ${#SELF_CHECKS[@]} deliberate changes"
}

build_baseline
case "$mode" in
  check) run_check ;;
  self-check) run_self_check ;;
  all) run_check; run_self_check ;;
  dump)
    if [ "$2" = migrations ]; then build_migrations; else build_schemas; fi
    cat "$work/$2"
    ;;
esac
