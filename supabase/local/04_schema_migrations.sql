-- =============================================================================
-- Local Supabase shim: migration bookkeeping and database privileges
-- =============================================================================
-- The table the Supabase CLI records applied migrations in, so that `make migrate` and
-- `supabase db push` agree on what is applied. scripts/migrate.sh creates it too (for
-- hosted databases the CLI has never touched); the definition is the same.
create schema if not exists supabase_migrations authorization postgres;
create table if not exists supabase_migrations.schema_migrations (
  version text primary key,
  statements text[],
  name text
);
alter table supabase_migrations.schema_migrations owner to postgres;

-- The migration role owns `public` and may create schemas, as on hosted Supabase.
do $$
begin
  execute format('grant all on database %I to postgres', current_database());
end
$$;
alter schema public owner to postgres;
grant usage on schema public to anon, authenticated, service_role;

-- Hosted Supabase's default privileges: objects the migration role creates in `public` are
-- granted to the API roles, and row-level security is what keeps rows private.
alter default privileges for role postgres in schema public
  grant all on tables to anon, authenticated, service_role;
alter default privileges for role postgres in schema public
  grant all on sequences to anon, authenticated, service_role;
alter default privileges for role postgres in schema public
  grant all on functions to anon, authenticated, service_role;
