#!/usr/bin/env bash
# `make bench-http`: trivial POST throughput and p99 with wrk against HTTPServer
# (Benchmarks/HTTPEchoServer, release build) and against nginx answering `return 200` (the
# baseline, one worker like our one event loop), then memory per idle WebSocket.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
cd "$ROOT"

seconds=${BENCH_SECONDS:-10}
idle=${BENCH_IDLE_WEBSOCKETS:-10000}
dir=$(mktemp -d)
pids=()
cleanup() { for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done; rm -rf "$dir"; }
trap cleanup EXIT

cat >"$dir/post.lua" <<'LUA'
wrk.method = "POST"
wrk.body = "{\"ping\":1}"
wrk.headers["Content-Type"] = "application/json"
LUA

# Prints "requests_per_second p99" for a wrk run against URL.
measure() {
  wrk -t2 -c64 -d"${seconds}s" --latency -s "$dir/post.lua" "$1" >"$dir/wrk.txt"
  awk '/Requests\/sec:/ {rps = $2} /^ +99%/ {p99 = $2} END {print rps, p99}' "$dir/wrk.txt"
}

swift build -c release --product http-echo-server >/dev/null
PORT=18180 .build/release/http-echo-server >"$dir/echo.out" &
pids+=($!)
echo_pid=$!

mkdir -p "$dir/nginx"
cat >"$dir/nginx.conf" <<CONF
worker_processes 1;
daemon off;
pid $dir/nginx.pid;
error_log $dir/nginx-error.log;
events { worker_connections 4096; }
http {
  access_log off;
  client_body_temp_path $dir/nginx;
  server { listen 127.0.0.1:18181; location / { return 200 "ok"; } }
}
CONF
nginx -c "$dir/nginx.conf" &
pids+=($!)
sleep 1

read -r ours_rps ours_p99 <<<"$(measure http://127.0.0.1:18180/)"
read -r nginx_rps nginx_p99 <<<"$(measure http://127.0.0.1:18181/)"
memory=$("$ROOT/.venv/bin/python" Benchmarks/idle_websockets.py 18180 "$echo_pid" "$idle")

echo "HTTPServer benchmark (wrk -t2 -c64 -d${seconds}s, POST with a small JSON body, loopback, $(nproc) cores)"
printf '%-34s %-14s %-10s\n' "server" "requests/s" "p99"
printf '%-34s %-14s %-10s\n' "HTTPServer (1 event loop)" "$ours_rps" "$ours_p99"
printf '%-34s %-14s %-10s\n' "nginx 'return 200' (1 worker)" "$nginx_rps" "$nginx_p99"
awk -v a="$ours_rps" -v b="$nginx_rps" 'BEGIN {printf "throughput ratio HTTPServer / nginx: %.2f\n", a / b}'
echo "$memory"
