-- =============================================================================
-- Local Supabase shim: the extensions schema
-- =============================================================================
-- Supabase installs extensions into `extensions`, which every API role may use.

create schema if not exists extensions;
-- Owned by postgres, as on Supabase: the migration role may grant its use (the pgTAP
-- helpers grant it to the relay's role when `make test-db DATABASE_URL=…` runs them as postgres).
alter schema extensions owner to postgres;
grant usage on schema extensions to postgres, anon, authenticated, service_role;

create extension if not exists pgcrypto with schema extensions;
-- pgTAP for supabase/tests (hosted Supabase offers it in the same schema).
create extension if not exists pgtap with schema extensions;

-- Hosted Supabase's default search path, so `extensions` functions resolve unqualified
-- in interactive sessions and tests (migrations always qualify them).
do $$
begin
  execute format('alter database %I set search_path = "$user", public, extensions',
                 current_database());
end
$$;
