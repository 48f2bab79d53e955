#!/usr/bin/env bash
# `make fuzz`: builds the libFuzzer targets for the HTTP request parser and the WebSocket
# frame decoder (swiftc -sanitize=fuzzer,address) and runs each for FUZZ_SECONDS (60).
# Corpora live under .build/fuzz/ (not committed); a crash leaves its input there too.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
cd "$ROOT"

seconds=${FUZZ_SECONDS:-60}
out=.build/fuzz
mkdir -p "$out"
sources=(Sources/HTTPServer/HTTPRequestParser.swift Sources/HTTPServer/HTTPRequest.swift
         Sources/HTTPServer/HTTPHeaders.swift Sources/HTTPServer/HTTPServerLimits.swift
         Sources/HTTPServer/WebSocketAccept.swift Sources/HTTPServer/WebSocketFrame.swift
         Sources/HTTPServer/WebSocketFrameDecoder.swift)

for target in HTTPRequestParser WebSocketFrameDecoder; do
  echo "fuzz: building $target"
  swiftc -O -sanitize=fuzzer,address -parse-as-library -module-name FuzzTarget \
    -I Sources/COpenSSL -lcrypto "${sources[@]}" "Fuzz/${target}Fuzz.swift" -o "$out/$target" 2>&1 \
    | grep -v "warning:" || true
  [ -x "$out/$target" ] || die "building the $target fuzz target failed"
  mkdir -p "$out/corpus-$target"
  echo "fuzz: running $target for ${seconds}s"
  (cd "$out" && "./$target" -max_total_time="$seconds" -timeout=5 -rss_limit_mb=2048 \
     -print_final_stats=1 "corpus-$target" 2>&1 | grep -E "stat::number_of_executed_units|Done|ERROR|crash" || true)
  ls "$out"/crash-* "$out"/timeout-* 2>/dev/null && die "$target: the fuzzer found a failing input (above)"
done
echo "fuzz: no crash, hang or sanitizer report"
