#!/usr/bin/env bash
# `make fuzz`: builds a libFuzzer target (swiftc -sanitize=fuzzer,address) for every decoder
# of peer bytes and runs each for FUZZ_SECONDS (60): the HTTP request parser, the WebSocket
# frame decoder, PROXY protocol headers, X-Forwarded-For and Forwarded, Web Push endpoints, phone messages, MCP JSON-RPC bodies, JWTs (header and claims), query
# strings, notification payloads and push services' responses. Each starts from its committed seed corpus
# (Fuzz/corpus/<target>/, which holds the inputs of the hostile-input findings); the
# working corpora live under .build/fuzz/ (not committed); a crash leaves its input there.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
cd "$ROOT"

seconds=${FUZZ_SECONDS:-60}
targets=${FUZZ_TARGETS:-"HTTPRequestParser WebSocketFrameDecoder QueryString ProxyHeader ForwardedFor PushEndpoint PhoneMessage MCPRequest JWT Notification PushResponse"}
out=.build/fuzz
mkdir -p "$out"
http=(Sources/HTTPServer/HTTPRequestParser.swift Sources/HTTPServer/HTTPRequest.swift
      Sources/HTTPServer/HTTPHeaders.swift Sources/HTTPServer/HTTPServerLimits.swift
      Sources/HTTPServer/WebSocketAccept.swift Sources/HTTPServer/WebSocketFrame.swift
      Sources/HTTPServer/WebSocketFrameDecoder.swift)
messages=(Sources/Relay/Devices/PhoneMessage.swift Sources/Relay/Devices/PhoneAccountRequest.swift Sources/Relay/Server/DeviceCredential.swift Sources/Relay/DisplayText.swift
          Sources/Relay/Database/RelayMessages.swift Sources/Relay/Database/RelayStatus.swift Sources/Relay/Locate/LocationFix.swift
          Sources/Relay/Locate/LocateReason.swift
          Sources/Relay/Locate/JSONValue+UUID.swift Sources/Relay/Locate/UUIDText.swift
          Sources/Relay/AgentFailure.swift)
auth=(Sources/Relay/Auth/JWTVerifier.swift Sources/Relay/Auth/PublicKey.swift Sources/Relay/Auth/DER.swift
      Sources/Relay/Auth/AuthError.swift Sources/Relay/Auth/JWTClaims.swift)

push=(Sources/Push/PushHTTP.swift Sources/Push/PushDelivery.swift
      Sources/Push/APNsResponse.swift Sources/Push/WebPushResponse.swift)

sources_of() {
  case "$1" in
    HTTPRequestParser|WebSocketFrameDecoder|QueryString) echo "${http[@]}" ;;
    ProxyHeader) echo Sources/HTTPServer/ProxyHeader.swift ;;
    ForwardedFor) echo Sources/HTTPServer/ForwardedFor.swift Sources/HTTPServer/ForwardedElements.swift \
                       Sources/HTTPServer/TrustedProxies.swift Sources/HTTPServer/HTTPHeaders.swift Sources/HTTPServer/ProxyHeader.swift \
                       Sources/HTTPServer/AddressBudget.swift ;;
    PushEndpoint) echo Sources/Push/PushEndpoint.swift ;;
    PhoneMessage) echo "${messages[@]}" ;;
    MCPRequest) echo Sources/Relay/MCP/JSONRPCMessage.swift Sources/Relay/MCP/MCPProgressRequest.swift Sources/Relay/MCP/MCPRevision.swift \
                     Sources/Relay/Locate/DurableParams.swift Sources/Relay/Sealing/RequestToken.swift \
                     Sources/Relay/Sealing/ReplyKey.swift Sources/Relay/Sealing/X25519KeyPool.swift ;;
    JWT) echo "${auth[@]}" ;;
    Notification) echo "${messages[@]}" Sources/Relay/Server/RelayNotification.swift Sources/Relay/Auth/AgentKey.swift ;;
    PushResponse) echo "${push[@]}" ;;
    *) die "unknown fuzz target $1" ;;
  esac
}

# FUZZ_CHANGED=1 (make test-fast): only the targets whose decoder changed in the working
# tree (a listed source, the target's own file or seed corpus; Crypto or JSON: every target).
if [ "${FUZZ_CHANGED:-}" = 1 ]; then
  changed=$(git status --porcelain --untracked-files=all | cut -c4- | sed 's/.* -> //')
  selected=""
  for target in $targets; do
    for file in $(sources_of "$target") "Fuzz/${target}Fuzz.swift" "Fuzz/corpus/$target/" Sources/Crypto/ Sources/JSON/; do
      if grep -q "^${file}" <<<"$changed"; then selected="$selected $target"; break; fi
    done
  done
  targets=$selected
  if [ -z "$targets" ]; then echo "fuzz: no decoder changed in the working tree; nothing to fuzz"; exit 0; fi
  echo "fuzz: changed decoders:$targets"
fi

# The Crypto and JSON modules, instrumented like the targets, that every target links (their
# base64url, key and JSON parsers are on the fuzzed paths).
for module in Crypto JSON; do
  echo "fuzz: building the $module module"
  rm -f "$out/lib$module.a"
  swiftc -O -sanitize=fuzzer,address -parse-as-library -module-name "$module" -I Sources/COpenSSL \
    -emit-library -static -emit-module -emit-module-path "$out/$module.swiftmodule" \
    Sources/"$module"/*.swift -o "$out/lib$module.a" 2>&1 | grep -v "warning:" || true
  [ -f "$out/lib$module.a" ] || die "building the $module module for the fuzz targets failed"
done

for target in $targets; do
  echo "fuzz: building $target"
  rm -f "$out/$target"  # a binary from an earlier run must not pass for this build
  # shellcheck disable=SC2046
  swiftc -O -sanitize=fuzzer,address -parse-as-library -module-name FuzzTarget \
    -I Sources/COpenSSL -I "$out" -L "$out" -lCrypto -lJSON -lcrypto $(sources_of "$target") "Fuzz/${target}Fuzz.swift" -o "$out/$target" 2>&1 \
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
