#!/usr/bin/env bash
# `make fuzz`: builds a libFuzzer target (swiftc -sanitize=fuzzer,address, against the
# package's modules built instrumented) for every decoder of peer bytes and runs each for FUZZ_SECONDS (60): the HTTP request parser, the WebSocket
# frame decoder, PROXY protocol headers, X-Forwarded-For and Forwarded, Web Push endpoints, phone messages, MCP JSON-RPC bodies, JWTs (header and claims), query
# strings, notification payloads and push services' responses. Each starts from its committed seed corpus
# (Fuzz/corpus/<target>/, which holds the inputs of the hostile-input findings); the
# working corpora live under .build/fuzz/ (not committed); a crash leaves its input there.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
cd "$ROOT"

seconds=${FUZZ_SECONDS:-60}
targets=${FUZZ_TARGETS:-"HTTPRequestParser WebSocketFrameDecoder QueryString ProxyHeader ForwardedFor PushEndpoint PhoneMessage MCPRequest JWT Notification PushResponse OAuthRequest"}
out=.build/fuzz
mkdir -p "$out"
# Each target is a file of Fuzz/ that links the package's module it fuzzes, whole
# (`@testable import`): a decoder's new file needs nothing here.
module_of() {
  case "$1" in
    HTTPRequestParser|WebSocketFrameDecoder|QueryString|ProxyHeader|ForwardedFor) echo HTTPServer ;;
    PushEndpoint|PushResponse) echo Push ;;
    PhoneMessage|MCPRequest|JWT|Notification|OAuthRequest) echo Relay ;;
    *) die "unknown fuzz target $1" ;;
  esac
}

# FUZZ_CHANGED=1 (make test-fast): only the targets whose module changed in the working
# tree (a source of the module or of one it depends on, the target's own file or seed corpus).
if [ "${FUZZ_CHANGED:-}" = 1 ]; then
  changed=$(git status --porcelain --untracked-files=all | cut -c4- | sed 's/.* -> //')
  selected=""
  for target in $targets; do
    case $(module_of "$target") in
      HTTPServer) modules="Sources/HTTPServer/ Sources/Loop/ Sources/CSystem/" ;;
      Push) modules="Sources/Push/ Sources/Crypto/ Sources/JSON/ Sources/CSystem/" ;;
      Relay) modules="Sources/" ;;
    esac
    for file in $modules "Fuzz/${target}Fuzz.swift" "Fuzz/corpus/$target/"; do
      if grep -q "^${file}" <<<"$changed"; then selected="$selected $target"; break; fi
    done
  done
  targets=$selected
  if [ -z "$targets" ]; then echo "fuzz: no decoder changed in the working tree; nothing to fuzz"; exit 0; fi
  echo "fuzz: changed decoders:$targets"
fi

# The package's modules, instrumented for libFuzzer and AddressSanitizer, built once by
# SwiftPM in a folder of their own (with -enable-testing, so that targets reach internal
# decoders); each target then links every module's objects.
scratch=.build/fuzz-modules
echo "fuzz: building the modules (instrumented)"
if ! swift build --scratch-path "$scratch" --target Relay -Xswiftc -sanitize=fuzzer,address \
    -Xswiftc -enable-testing -Xcc -fsanitize=fuzzer-no-link,address >"$out/modules.log" 2>&1; then
  grep -E "error:" "$out/modules.log" || tail -20 "$out/modules.log"
  die "building the modules for the fuzz targets failed"
fi
bin=$(swift build --scratch-path "$scratch" --show-bin-path)
# (One -sanitize=fuzzer,address: given as two options the driver keeps only the last, and
# the modules would carry no coverage counters; libFuzzer would then run blind.)
[ "$(nm "$bin"/HTTPServer.build/HTTPRequestParser.swift.o | grep -c __sancov)" -gt 0 ] || die "the modules were built without coverage counters"
objects=()
for module in CSystem Loop Lifecycle PGBus HTTPServer Crypto Fetch JSON Push RelayCore Relay; do
  objects+=("$bin/$module.build"/*.o)
done
imports=(-I "$bin/Modules" -I Sources/COpenSSL -I Sources/CLibPQ -I Sources/CCurl
         -Xcc -fmodule-map-file="$bin/CSystem.build/module.modulemap" -Xcc -I/usr/include/postgresql)

for target in $targets; do
  echo "fuzz: building $target"
  rm -f "$out/$target"  # a binary from an earlier run must not pass for this build
  swiftc -sanitize=fuzzer,address -parse-as-library -module-name "${target}Fuzz" "${imports[@]}" \
    "Fuzz/${target}Fuzz.swift" "${objects[@]}" -lpq -lssl -lcrypto -lcurl -o "$out/$target" 2>&1 \
    | grep -v "warning:" || true
  [ -x "$out/$target" ] || die "building the $target fuzz target failed"
  mkdir -p "$out/corpus-$target"
  if [ -d "Fuzz/corpus/$target" ]; then cp -n Fuzz/corpus/"$target"/* "$out/corpus-$target/" 2>/dev/null || true; fi
  echo "fuzz: running $target for ${seconds}s"
  (cd "$out" && "./$target" -max_total_time="$seconds" -timeout=5 -rss_limit_mb=2048 -max_len=8192 \
     -print_final_stats=1 "corpus-$target" 2>&1 | grep -E "stat::number_of_executed_units|Done|ERROR|crash" || true)
  ls "$out"/crash-* "$out"/timeout-* "$out"/oom-* 2>/dev/null && die "$target: the fuzzer found a failing input (above)"
done
echo "fuzz: no crash, hang or sanitizer report"
