#!/usr/bin/env bash
# `make cluster`: two relay instances (127.0.0.1:8081 and :8082) behind HAProxy on
# 127.0.0.1:8080 with deploy/haproxy.cfg, against the local database. Ctrl-C stops all three.
# Try a rolling restart: kill -TERM the pid of one relay (printed below) while a phone is
# connected and an agent waits; then start it again with the printed command.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
cd "$ROOT"
eval "$(PORT=8080 scripts/env.sh)"
swift build "${SWIFT_DEBUG_FLAGS[@]}" --product whereabot >/dev/null
bin=.build/debug/whereabot
mkdir -p .local/cluster
pids=()
stop() { kill -TERM "${pids[@]}" 2>/dev/null || true; wait 2>/dev/null || true; }
trap stop EXIT INT TERM

start_relay() {  # name port
  PORT=$2 INSTANCE_ID=$1 TRUSTED_PROXIES=127.0.0.1 "$bin" serve >>".local/cluster/$1.log" 2>&1 &
  pids+=($!)
  echo "  $1 on 127.0.0.1:$2, pid $!, log .local/cluster/$1.log"
}

echo "Whereabot cluster (Ctrl-C stops it):"
start_relay relay-1 8081
start_relay relay-2 8082
WHEREABOT_BIND=127.0.0.1:8080 WHEREABOT_RELAY1=127.0.0.1:8081 WHEREABOT_RELAY2=127.0.0.1:8082 \
  haproxy -db -f deploy/haproxy.cfg >>.local/cluster/haproxy.log 2>&1 &
pids+=($!)
echo "  haproxy on $PUBLIC_URL, pid $!, log .local/cluster/haproxy.log"
cat <<HELP

Phones and agents use $PUBLIC_URL exactly as with \`make run\` (see its commands), e.g.
  eval "\$(make -s env)"
  $bin phone --relay $PUBLIC_URL --token "\$($bin token --email you@example.com)" --answer allow
Restart one instance by hand (same id, same port):
  (eval "\$(make -s env)"; PORT=8081 INSTANCE_ID=relay-1 $bin serve)
HELP
wait -n "${pids[@]}" || true
