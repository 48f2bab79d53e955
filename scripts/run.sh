#!/usr/bin/env bash
# `make run`: one relay on 127.0.0.1:8080 against the local database, with development
# secrets; prints what to try next.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
cd "$ROOT"
eval "$(scripts/env.sh)"
swift build "${SWIFT_DEBUG_FLAGS[@]}" --product whereabot >/dev/null
bin=.build/debug/whereabot
link=$("$bin" token --email you@example.com --app-link --relay "$PUBLIC_URL")
cat <<HELP

Whereabot relay on $PUBLIC_URL (Ctrl-C stops it); people sign in through the local
Supabase Auth stand-in on $SUPABASE_URL (mails: http://127.0.0.1:54324/api/v1/messages).

Add this URL to your MCP client; it signs in with the relay through your browser (OAuth):

  $PUBLIC_URL/mcp

Open your phone in a browser; it asks "Sign in as you@example.com on this browser?":
tap Sign in (the session lasts 24 hours; the header shows the signed-in address):

  $link

then, in another terminal, ask as an agent and tap Allow in the browser:

  eval "\$(make -s env)"
  curl -s -X POST -H "Authorization: Bearer \$($bin token --email you@example.com --agent 'My agent')" \\
    '$PUBLIC_URL/v1/locate?timeout_secs=30'

More, in that terminal:

1. A phone in the terminal that asks you before answering:
  $bin phone --relay $PUBLIC_URL --token "\$($bin token --email you@example.com)" --answer ask

2. An agent asking over HTTP:
  curl -s -X POST -H "Authorization: Bearer \$($bin token --email you@example.com --agent 'My agent')" \\
    '$PUBLIC_URL/v1/locate?timeout_secs=30'

3. An MCP client (for example in its JSON config), with a token from the same command:
  {"mcpServers": {"whereabot": {"url": "$PUBLIC_URL/mcp",
    "headers": {"Authorization": "Bearer <whereabot token --email you@example.com --agent 'Claude'>"}}}}

HELP
exec "$bin" serve
