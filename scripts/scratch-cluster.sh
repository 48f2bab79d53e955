#!/usr/bin/env bash
# A throwaway PostgreSQL cluster for tests that restart or crash the server, so that they
# never disturb the shared test cluster. Trust authentication on 127.0.0.1 only.
#   scratch-cluster.sh start DIR PORT    initdb (if needed) and start
#   scratch-cluster.sh restart DIR       pg_ctl restart -m fast
#   scratch-cluster.sh crash DIR         pg_ctl stop -m immediate (no shutdown checkpoint)
#   scratch-cluster.sh stop DIR          stop and delete DIR
set -euo pipefail
source "$(dirname "$0")/lib.sh"

command=${1:-}
dir=${2:-}
[ -n "$dir" ] || { echo "usage: $0 start|restart|crash|stop DIR [PORT]" >&2; exit 64; }
data=$dir/data

case "$command" in
  start)
    port=${3:?a port is needed}
    mkdir -p "$dir"
    if [ "$(id -u)" = 0 ]; then chown postgres "$dir"; fi
    if [ ! -f "$data/PG_VERSION" ]; then
      as_pg "$PG_BIN/initdb" -D "$data" -U postgres --auth=trust -E UTF8 --locale=C.UTF-8 >/dev/null
      printf "listen_addresses = '127.0.0.1'\nport = %s\nunix_socket_directories = '%s'\nfsync = off\n" \
        "$port" "$dir" >>"$data/postgresql.conf"
    fi
    as_pg "$PG_BIN/pg_ctl" -D "$data" -l "$dir/log" -w -t 60 start >/dev/null
    ;;
  restart) as_pg "$PG_BIN/pg_ctl" -D "$data" -l "$dir/log" -m fast -w -t 60 restart >/dev/null ;;
  crash) as_pg "$PG_BIN/pg_ctl" -D "$data" -m immediate -w stop >/dev/null ;;
  stop)
    as_pg "$PG_BIN/pg_ctl" -D "$data" -m immediate -w stop >/dev/null 2>&1 || true
    rm -rf "$dir"
    ;;
  *) echo "usage: $0 start|restart|crash|stop DIR [PORT]" >&2; exit 64 ;;
esac
