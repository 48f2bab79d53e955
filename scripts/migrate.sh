#!/usr/bin/env bash
# Applies pending migrations from supabase/migrations to DATABASE_URL.
#
# Each file YYYYMMDDHHMMSS_name.sql runs in its own transaction together with its row in
# supabase_migrations.schema_migrations (the Supabase CLI's table, so that this and
# `supabase db push` agree). The first error stops the run with the file and line; that
# file's changes are rolled back whole and nothing after it runs. Applied files are skipped.
# Migration files must not contain transaction control (begin/commit).
#
# Each migration waits at most MIGRATE_LOCK_TIMEOUT (default 5s) for a lock: a migration
# that adds a trigger to auth.users or auth.sessions would otherwise queue behind a busy
# sign-in and hold every sign-in after it behind its own lock. One that times out is rolled
# back and tried again after 2 s, 4 s, 8 s … up to MIGRATE_ATTEMPTS times (default 5),
# saying so each time.
set -euo pipefail
source "$(dirname "$0")/lib.sh"

: "${DATABASE_URL:=$(owner_url)}"
MIGRATIONS_DIR=${MIGRATIONS_DIR:-$ROOT/supabase/migrations}
MIGRATE_LOCK_TIMEOUT=${MIGRATE_LOCK_TIMEOUT:-5s}
MIGRATE_ATTEMPTS=${MIGRATE_ATTEMPTS:-5}
[[ $MIGRATE_ATTEMPTS =~ ^[1-9][0-9]?$ ]] || die "MIGRATE_ATTEMPTS must be a whole number from 1 to 99, not '$MIGRATE_ATTEMPTS'"
[[ $MIGRATE_LOCK_TIMEOUT =~ ^[0-9]+(ms|s)$ ]] || die "MIGRATE_LOCK_TIMEOUT must be a duration such as 5s or 500ms, not '$MIGRATE_LOCK_TIMEOUT'"
[ -d "$MIGRATIONS_DIR" ] || die "no migrations folder at $MIGRATIONS_DIR"

psql_strict "$DATABASE_URL" <<'SQL' >/dev/null
create schema if not exists supabase_migrations;
create table if not exists supabase_migrations.schema_migrations (
  version text primary key,
  statements text[],
  name text
);
SQL

applied=$(psql -X -A -t -q "$DATABASE_URL" -c "select version from supabase_migrations.schema_migrations")
count=0
shopt -s nullglob
for file in "$MIGRATIONS_DIR"/*.sql; do
  base=$(basename "$file" .sql)
  version=${base%%_*}
  name=${base#*_}
  [[ $version =~ ^[0-9]{14}$ && $name != "$base" ]] \
    || die "$file: name must be YYYYMMDDHHMMSS_feature.sql"
  if grep -qx "$version" <<<"$applied"; then continue; fi
  if grep -Eiq '^[[:space:]]*(begin|commit|rollback|start transaction)[[:space:]]*;' "$file"; then
    die "$file: contains transaction control; each migration already runs in one transaction"
  fi

  echo "migrate: applying $base"
  attempt=1
  while true; do
    errors=$(mktemp)
    if psql -X -q -v ON_ERROR_STOP=1 -v version="$version" -v name="$name" -v file="$file" \
        -v lock_timeout="$MIGRATE_LOCK_TIMEOUT" "$DATABASE_URL" >/dev/null 2>"$errors" <<'SQL'
begin;
select set_config('lock_timeout', :'lock_timeout', true);
select pg_advisory_xact_lock(hashtext('supabase_migrations'));
\i :file
\set statements `cat -- :'file'`
insert into supabase_migrations.schema_migrations (version, name, statements)
values (:'version', :'name', array[:'statements']);
commit;
SQL
    then
      cat "$errors" >&2; rm -f "$errors"
      break
    fi
    cat "$errors" >&2
    if grep -q "lock timeout" "$errors" && [ "$attempt" -lt "$MIGRATE_ATTEMPTS" ]; then
      rm -f "$errors"
      wait_seconds=$((1 << attempt))
      echo "migrate: $base waited $MIGRATE_LOCK_TIMEOUT for a lock (attempt $attempt of $MIGRATE_ATTEMPTS); nothing of it was applied; trying again in ${wait_seconds} s" >&2
      sleep "$wait_seconds"
      attempt=$((attempt + 1))
      continue
    fi
    if grep -q "lock timeout" "$errors"; then
      echo "migrate: FAILED in $file: a lock it needs was held by another session for $MIGRATE_LOCK_TIMEOUT in each of $MIGRATE_ATTEMPTS attempts (a long transaction on a table it alters?); nothing of it was applied" >&2
    else
      echo "migrate: FAILED in $file (the error above gives its line); nothing of it was applied" >&2
    fi
    rm -f "$errors"
    exit 1
  done
  count=$((count + 1))
done
echo "migrate: $count applied, $(wc -w <<<"$applied") already applied"
