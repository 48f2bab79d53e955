# Shared settings for the local database scripts. Sourced, never run.
# Every value can be overridden from the environment.

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
LOCAL_DIR=${LOCAL_DIR:-$ROOT/.local}
PG_BIN=${PG_BIN:-$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1)}
# psql, pg_dump and the rest straight from that folder: Debian's /usr/bin/psql is a Perl
# wrapper (pg_wrapper) that costs 40 ms of CPU at every start, more than most of what the
# scripts and the tests ask psql to do (a migration run starts it 61 times, make test ~2,000).
if [ -d "$PG_BIN" ]; then export PATH="$PG_BIN:$PATH"; fi
PGHOST_LOCAL=${PGHOST_LOCAL:-127.0.0.1}
PGPORT_LOCAL=${PGPORT_LOCAL:-54322}
# Development-only passwords, as the Supabase CLI's local stack uses.
ADMIN_PASSWORD=${ADMIN_PASSWORD:-postgres}
RELAY_PASSWORD=${RELAY_PASSWORD:-whereabot-relay-dev}
LOCAL_DB=${LOCAL_DB:-postgres}
TEST_DB=${TEST_DB:-whereabot_test}
# Debug builds by the scripts and the Makefile carry no debug info: a clean build of the
# package and its tests takes 78 s of wall time and 146 s of CPU on two cores instead of
# 121 s and about twice the CPU (issue 40). Failures still name their file and line, and
# crash backtraces their functions; for lldb, build without it (a full build of its own).
SWIFT_DEBUG_FLAGS=(-Xswiftc -gnone)

# The bootstrap superuser (as on Supabase), the migration role, and the relay's role.
admin_url() { echo "postgresql://supabase_admin:$ADMIN_PASSWORD@$PGHOST_LOCAL:$PGPORT_LOCAL/${1:-$LOCAL_DB}"; }
owner_url() { echo "postgresql://postgres:$ADMIN_PASSWORD@$PGHOST_LOCAL:$PGPORT_LOCAL/${1:-$LOCAL_DB}"; }
relay_url() { echo "postgresql://whereabot_relay:$RELAY_PASSWORD@$PGHOST_LOCAL:$PGPORT_LOCAL/${1:-$LOCAL_DB}"; }

# The cluster lives under .local/ unless the postgres OS user cannot reach it (a checkout
# in a private home directory, say); then in a folder of its own under /var/tmp.
pg_data_dir() {
  if [ "$(id -u)" = 0 ] && ! runuser -u postgres -- test -x "$ROOT" 2>/dev/null; then
    echo "/var/tmp/whereabot-$(printf %s "$ROOT" | md5sum | cut -c1-12)/pgdata"
  else
    echo "$LOCAL_DIR/pgdata"
  fi
}
PGDATA_LOCAL=${PGDATA_LOCAL:-$(pg_data_dir)}
PG_LOG=$(dirname "$PGDATA_LOCAL")/postgres.log

# Runs a PostgreSQL server binary as the postgres OS user when we are root (initdb and
# postgres refuse to run as root), or as ourselves otherwise.
as_pg() {
  if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi
}

# psql that stops at the first error and reads no ~/.psqlrc.
psql_strict() { psql -X -q -v ON_ERROR_STOP=1 "$@"; }

die() { echo "$(basename "$0"): $*" >&2; exit 1; }

# The Supabase shim (supabase/local/*.sql) applied to database $1, as the bootstrap superuser.
apply_shim() {
  local db=$1
  for file in "$ROOT"/supabase/local/*.sql; do
    psql_strict "$(admin_url "$db")" -f "$file" >/dev/null
  done
  psql_strict "$(admin_url "$db")" -c "alter role postgres password '$ADMIN_PASSWORD'" >/dev/null
}

# Database $1 dropped if it exists and created again, owned by the migration role, with the shim.
fresh_database() {
  local db=$1
  psql_strict "$(admin_url)" -c "drop database if exists $db with (force)" >/dev/null
  psql_strict "$(admin_url)" -c "create database $db owner postgres" >/dev/null
  apply_shim "$db"
}

# Every pending migration applied to database $1 as the migration role (scripts/migrate.sh).
apply_migrations() {
  DATABASE_URL=$(owner_url "$1") "$ROOT/scripts/migrate.sh" >/dev/null
}

# NOTICEs ("already exists, skipping") are noise in re-runnable scripts.
export PGOPTIONS="${PGOPTIONS:-} -c client_min_messages=warning"

# Copies of database $1 named $1_gw0 … $1_gw<N-1>, one per pytest-xdist worker, with the
# database-level settings of $1 (CREATE DATABASE … TEMPLATE copies the data, not those).
worker_databases() {
  local db=$1 count=$2 i copy
  for ((i = 0; i < count; i++)); do
    copy="${db}_gw$i"
    psql_strict "$(admin_url)" -c "drop database if exists $copy with (force)" >/dev/null
    psql_strict "$(admin_url)" -c "create database $copy template $db owner postgres" >/dev/null
    psql -X -A -t -q -v ON_ERROR_STOP=1 "$(admin_url)" -v source="$db" -v copy="$copy" <<'SQL' | psql_strict "$(admin_url)" >/dev/null
-- name=value as stored; search_path keeps its list syntax, any other value is one literal.
select case when s.setrole = 0 then format('alter database %I', :'copy')
            else format('alter role %I in database %I', s.setrole::regrole, :'copy') end
       || format(' set %I to ', split_part(c, '=', 1))
       || case when split_part(c, '=', 1) = 'search_path' then substr(c, strpos(c, '=') + 1)
               else quote_literal(substr(c, strpos(c, '=') + 1)) end || ';'
from pg_db_role_setting s cross join unnest(s.setconfig) c
where s.setdatabase = (select oid from pg_database where datname = :'source');
SQL
  done
}

