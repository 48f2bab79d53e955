#!/usr/bin/env bash
# Applies pending migrations from supabase/migrations to DATABASE_URL.
#
# Each file YYYYMMDDHHMMSS_name.sql runs in its own transaction together with its row in
# supabase_migrations.schema_migrations (the Supabase CLI's table, so that this and
# `supabase db push` agree). The first error stops the run with the file and line; that
# file's changes are rolled back whole and nothing after it runs. Applied files are skipped.
# Migration files must not contain transaction control (begin/commit).
set -euo pipefail
source "$(dirname "$0")/lib.sh"

: "${DATABASE_URL:=$(owner_url)}"
MIGRATIONS_DIR=${MIGRATIONS_DIR:-$ROOT/supabase/migrations}
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
  if ! psql -X -q -v ON_ERROR_STOP=1 -v version="$version" -v name="$name" -v file="$file" \
      "$DATABASE_URL" >/dev/null <<'SQL'
begin;
select pg_advisory_xact_lock(hashtext('supabase_migrations'));
\i :file
\set statements `cat -- :'file'`
insert into supabase_migrations.schema_migrations (version, name, statements)
values (:'version', :'name', array[:'statements']);
commit;
SQL
  then
    echo "migrate: FAILED in $file (the error above gives its line); nothing of it was applied" >&2
    exit 1
  fi
  count=$((count + 1))
done
echo "migrate: $count applied, $(wc -w <<<"$applied") already applied"
