#!/usr/bin/env bash
# `make audit`: the access report of scripts/audit.sql for DATABASE_URL (default: the local
# database), on stdout. docs/rls.md holds it for the migrations in the repository.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
url=${DATABASE_URL:-$(owner_url)}
psql -XAtq -v ON_ERROR_STOP=1 "$url" -f "$ROOT/scripts/audit.sql"
