-- =============================================================================
-- Local Supabase shim: roles
-- =============================================================================
-- Hosted Supabase creates these roles itself; this file gives a plain PostgreSQL 15 the
-- same roles with the same attributes, memberships and per-role settings, so that
-- migrations, RLS and timeouts behave alike (supabase/tests/51-supabase-shape.test.sql
-- checks the parts that matter). Applied only to local and test clusters by `make db` /
-- `make test`, never on Supabase. Runs as the bootstrap superuser (supabase_admin, as on
-- Supabase). Re-runnable: every attribute and setting is set again on each run.
--
-- Not reproduced (nothing of ours uses them): dashboard_user, supabase_storage_admin,
-- supabase_replication_admin, supabase_read_only_user, and the supautils/safeupdate
-- session_preload_libraries Supabase sets for authenticator, anon, authenticated and
-- postgres (those libraries are not installed here: a login would fail).

do $$
begin
  -- API roles: PostgREST switches to one of these per request.
  if not exists (select from pg_roles where rolname = 'anon') then
    create role anon nologin inherit;
  end if;
  if not exists (select from pg_roles where rolname = 'authenticated') then
    create role authenticated nologin inherit;
  end if;
  if not exists (select from pg_roles where rolname = 'service_role') then
    create role service_role nologin inherit bypassrls;
  end if;
  -- PostgREST logs in as authenticator and switches role.
  if not exists (select from pg_roles where rolname = 'authenticator') then
    create role authenticator login noinherit;
  end if;
  -- Supabase Auth (GoTrue) logs in as this role; it owns the auth tables.
  if not exists (select from pg_roles where rolname = 'supabase_auth_admin') then
    create role supabase_auth_admin login noinherit nocreaterole;
  end if;
  -- The role migrations and the dashboard run as: not a superuser on hosted Supabase, so
  -- superuser-only DDL in a migration fails here as it would in production.
  if not exists (select from pg_roles where rolname = 'postgres') then
    create role postgres login createrole createdb replication bypassrls;
  end if;
end
$$;

-- Attributes as on Supabase. The API roles inherit (Supabase changed them from NOINHERIT
-- in 2023), so a role granted to `authenticated` takes effect without SET ROLE;
-- authenticator does not, so it has only what the role it switches to has.
alter role anon nologin inherit nosuperuser nocreaterole nocreatedb noreplication nobypassrls;
alter role authenticated nologin inherit nosuperuser nocreaterole nocreatedb noreplication nobypassrls;
alter role service_role nologin inherit nosuperuser nocreaterole nocreatedb noreplication bypassrls;
alter role authenticator login noinherit nosuperuser nocreaterole nocreatedb noreplication nobypassrls;
alter role supabase_auth_admin login noinherit nosuperuser nocreaterole nocreatedb noreplication nobypassrls;
alter role postgres login nosuperuser createrole createdb replication bypassrls;

-- Per-role settings as on Supabase (cluster-wide, as theirs are). A role's settings apply
-- when it logs in, not on SET ROLE: the API roles' timeouts bind PostgREST's requests,
-- not tests that switch roles.
alter role anon set statement_timeout = '3s';
alter role authenticated set statement_timeout = '8s';
alter role authenticator set statement_timeout = '8s';
alter role authenticator set lock_timeout = '8s';
alter role supabase_auth_admin set search_path = auth;
alter role supabase_auth_admin set idle_in_transaction_session_timeout = 60000;
alter role postgres set search_path = "$user", public, extensions;
alter role supabase_admin set search_path = "$user", public, auth, extensions;

-- Memberships as on Supabase: authenticator may become any API role; postgres may too,
-- and holds the predefined roles Supabase grants it. postgres is NOT a member of
-- supabase_auth_admin (Supabase revoked that in 2024): it cannot alter or drop Auth's
-- tables, only use the privileges granted on them (03_auth.sql).
grant anon, authenticated, service_role to authenticator;
grant anon, authenticated, service_role to postgres;
grant pg_monitor, pg_read_all_data, pg_signal_backend to postgres;
do $$
begin
  if pg_has_role('postgres', 'supabase_auth_admin', 'member') then
    revoke supabase_auth_admin from postgres;
  end if;
end
$$;
