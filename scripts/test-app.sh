#!/usr/bin/env bash
# The browser phone's own unit tests (Tests/App): the modules of Sources/Relay/Resources/app
# that need no browser (the consent queue, the string catalog), with Node's test runner.
set -euo pipefail
cd "$(dirname "$0")/.."
command -v node >/dev/null || { echo "node is missing (Debian: apt-get install nodejs)" >&2; exit 1; }
exec node --test Tests/App/
