-- =============================================================================
-- Local Supabase shim: roles
-- =============================================================================
-- Hosted Supabase creates these roles itself; this file gives a plain PostgreSQL 15 the
-- same roles with the same attributes, so that migrations and RLS behave alike.
-- Applied only to local and test clusters by `make db` / `make test`, never on Supabase.
-- Runs as the bootstrap superuser (supabase_admin, as on Supabase). Re-runnable.

do $$
begin
  -- API roles: PostgREST switches to one of these per request.
  if not exists (select from pg_roles where rolname = 'anon') then
    create role anon nologin noinherit;
  end if;
  if not exists (select from pg_roles where rolname = 'authenticated') then
    create role authenticated nologin noinherit;
  end if;
  if not exists (select from pg_roles where rolname = 'service_role') then
    create role service_role nologin noinherit bypassrls;
  end if;
  -- PostgREST logs in as authenticator and switches role.
  if not exists (select from pg_roles where rolname = 'authenticator') then
    create role authenticator login noinherit;
  end if;
  -- Owner of the auth schema (GoTrue's role).
  if not exists (select from pg_roles where rolname = 'supabase_auth_admin') then
    create role supabase_auth_admin noinherit createrole nologin;
  end if;
  -- The role migrations and the dashboard run as: not a superuser on hosted Supabase, so
  -- superuser-only DDL in a migration fails here as it would in production.
  if not exists (select from pg_roles where rolname = 'postgres') then
    create role postgres login createrole createdb replication bypassrls;
  end if;
end
$$;

alter role anon nologin noinherit nosuperuser;
alter role authenticated nologin noinherit nosuperuser;
alter role service_role nologin noinherit nosuperuser bypassrls;
alter role authenticator login noinherit nosuperuser;
alter role postgres login nosuperuser createrole createdb replication bypassrls;

grant anon, authenticated, service_role to authenticator;
grant anon, authenticated, service_role to postgres;
