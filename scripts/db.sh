#!/usr/bin/env bash
# The local PostgreSQL cluster: start | stop | status | reset-test.
#   start       create the cluster under .local/ if needed, start it on 127.0.0.1:54322,
#               and apply the Supabase shim to the local database (idempotent).
#   stop        stop it (fast shutdown).
#   status      exit 0 when it runs.
#   reset-test  drop and re-create the test database, with the shim and every migration.
# `start` prints "started" when it started the server and "running" when it already ran.
set -euo pipefail
source "$(dirname "$0")/lib.sh"

[ -x "$PG_BIN/initdb" ] || die "no PostgreSQL server binaries in '$PG_BIN' (run: make deps)"

running() { as_pg "$PG_BIN/pg_ctl" -D "$PGDATA_LOCAL" status >/dev/null 2>&1; }

init_cluster() {
  local parent; parent=$(dirname "$PGDATA_LOCAL")
  mkdir -p "$parent"
  [ "$(id -u)" = 0 ] && chown postgres "$parent"
  echo "db: creating a cluster in $PGDATA_LOCAL" >&2
  local pwfile="$parent/initdb-password"
  (umask 077; printf '%s\n' "$ADMIN_PASSWORD" >"$pwfile")
  [ "$(id -u)" = 0 ] && chown postgres "$pwfile"
  as_pg "$PG_BIN/initdb" -D "$PGDATA_LOCAL" -U supabase_admin --pwfile="$pwfile" \
    --auth=scram-sha-256 -E UTF8 --locale=C.UTF-8 >/dev/null || { rm -f "$pwfile"; die "initdb failed"; }
  rm -f "$pwfile"
  cat >>"$PGDATA_LOCAL/postgresql.conf" <<CONF

# Whereabot local development settings
listen_addresses = '$PGHOST_LOCAL'
port = $PGPORT_LOCAL
unix_socket_directories = '$parent'
max_connections = 300
shared_buffers = 128MB
log_min_messages = warning
log_statement = 'none'
CONF
}

# Gives the relay's role (created NOLOGIN by a migration) a login for this cluster.
enable_relay_login() {
  local db=$1
  psql_strict "$(admin_url "$db")" -c \
    "alter role whereabot_relay login password '$RELAY_PASSWORD'" >/dev/null
}

case "${1:-}" in
  start)
    [ -f "$PGDATA_LOCAL/PG_VERSION" ] || init_cluster
    # A server of this cluster started for another port (by an older checkout) is stopped
    # and started again below where it is asked to listen (postmaster.pid's 4th line).
    if running && [ "$(sed -n 4p "$PGDATA_LOCAL/postmaster.pid" 2>/dev/null)" != "$PGPORT_LOCAL" ]; then
      as_pg "$PG_BIN/pg_ctl" -D "$PGDATA_LOCAL" -m fast -w stop >/dev/null
    fi
    if running; then
      state=running
    else
      if pg_isready -q -h "$PGHOST_LOCAL" -p "$PGPORT_LOCAL"; then
        die "another server already listens on $PGHOST_LOCAL:$PGPORT_LOCAL; stop it or set PGPORT_LOCAL"
      fi
      # A cluster made for another port (by an older checkout) listens where it is asked to
      # now, also when it is restarted with pg_ctl alone: the last `port` line wins.
      conf="$PGDATA_LOCAL/postgresql.conf"
      if [ "$(grep -E '^port = ' "$conf" | tail -n 1)" != "port = $PGPORT_LOCAL" ]; then
        echo "port = $PGPORT_LOCAL" >>"$conf"
      fi
      as_pg "$PG_BIN/pg_ctl" -D "$PGDATA_LOCAL" -l "$PG_LOG" -w -t 60 start >/dev/null \
        || { tail -n 20 "$PG_LOG" >&2; die "the server did not start (log above)"; }
      state=started
    fi
    apply_shim "$LOCAL_DB"
    echo "$state"
    ;;
  stop)
    if running; then as_pg "$PG_BIN/pg_ctl" -D "$PGDATA_LOCAL" -m fast -w stop >/dev/null; fi
    ;;
  status)
    running
    ;;
  migrate-local)
    # The local development database: migrations as the migration role, then the relay login.
    DATABASE_URL=$(owner_url "$LOCAL_DB") "$ROOT/scripts/migrate.sh"
    enable_relay_login "$LOCAL_DB"
    ;;
  reset-test)
    running || die "the cluster is not running (run: make db)"
    fresh_database "$TEST_DB"
    apply_migrations "$TEST_DB"
    enable_relay_login "$TEST_DB"
    psql_strict "$(admin_url "$TEST_DB")" -f "$ROOT/supabase/tests/helpers.sql" >/dev/null
    ;;
  *)
    echo "usage: $0 start|stop|status|migrate-local|reset-test" >&2
    exit 64
    ;;
esac
