#!/usr/bin/env bash
# `make env`: the local development environment as export lines (development secrets only).
set -euo pipefail
source "$(dirname "$0")/lib.sh"
cat <<ENV
export DATABASE_URL='$(relay_url)'
export ADMIN_DATABASE_URL='$(owner_url)'
export SUPABASE_JWT_SECRET='${SUPABASE_JWT_SECRET:-local-development-jwt-secret-not-for-production}'
export PORT='${PORT:-8080}'
export PUBLIC_URL='${PUBLIC_URL:-http://127.0.0.1:${PORT:-8080}}'
export INSTANCE_ID='${INSTANCE_ID:-local-1}'
export SUPABASE_URL='${SUPABASE_URL:-http://127.0.0.1:${AUTH_PORT:-54321}}'
export SUPABASE_ANON_KEY='${SUPABASE_ANON_KEY:-local-development-anon-key}'
export SUPABASE_JWKS_URL='${SUPABASE_JWKS_URL:-http://127.0.0.1:${AUTH_PORT:-54321}/auth/v1/.well-known/jwks.json}'
ENV
