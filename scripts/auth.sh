#!/usr/bin/env bash
# `make auth`: starts the local stand-in for Supabase Auth (auth/standin: a development
# stand-in production never uses) on 127.0.0.1:54321, with its mailbox on 127.0.0.1:54324,
# against the local database; does nothing when it already runs. `scripts/auth.sh stop`
# stops it. AUTH_SITE_URL (default http://127.0.0.1:8080) is where its consent redirect
# and its sign-in links go: the relay serving the browser phone.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
cd "$ROOT"

AUTH_PORT=${AUTH_PORT:-54321}
pid_file="$LOCAL_DIR/auth.pid"
mkdir -p "$LOCAL_DIR"

running() { [ -f "$pid_file" ] && kill -0 "$(cat "$pid_file")" 2>/dev/null; }

case "${1:-start}" in
  start)
    if running; then exit 0; fi
    if (exec 3<>"/dev/tcp/127.0.0.1/$AUTH_PORT") 2>/dev/null; then
      die "auth: something else listens on 127.0.0.1:$AUTH_PORT; stop it or set AUTH_PORT"
    fi
    AUTH_SITE_URL=${AUTH_SITE_URL:-http://127.0.0.1:${PORT:-8080}} \
    SUPABASE_JWT_SECRET=${SUPABASE_JWT_SECRET:-local-development-jwt-secret-not-for-production} \
    STANDIN_KEY_FILE="$LOCAL_DIR/auth-es256.pem" \
      nohup "$ROOT/.venv/bin/python" auth/standin/server.py --port "$AUTH_PORT" --database-url "$(admin_url)" \
      >"$LOCAL_DIR/auth.log" 2>&1 &
    echo $! >"$pid_file"
    for _ in $(seq 1 100); do
      if grep -q "^listening on " "$LOCAL_DIR/auth.log" 2>/dev/null; then exit 0; fi
      running || break
      sleep 0.1
    done
    cat "$LOCAL_DIR/auth.log" >&2
    die "auth: the stand-in did not start (log above)"
    ;;
  stop)
    if running; then kill "$(cat "$pid_file")"; fi
    rm -f "$pid_file"
    ;;
  *) die "usage: scripts/auth.sh [start|stop]" ;;
esac
