-- The shape of Supabase that our code and fixtures depend on (docs/database.md, "The Supabase shim"): the local shim
-- (supabase/local) must keep it, so that what passes here passes on Supabase. Each fact is
-- as Supabase's own sources leave it (supabase/postgres' role migrations, Supabase Auth's
-- migrations); this file passes on a database built from those sources too.
begin;
select plan(27);

-- auth.oauth_clients: who registers a client names its redirect URIs, grant types,
-- registration type and token endpoint method; nothing fills them in.
select has_column('auth', 'oauth_clients', 'token_endpoint_auth_method',
  'auth.oauth_clients has token_endpoint_auth_method');
select col_not_null('auth', 'oauth_clients', 'registration_type', 'oauth_clients.registration_type is NOT NULL');
select col_not_null('auth', 'oauth_clients', 'redirect_uris', 'oauth_clients.redirect_uris is NOT NULL');
select col_not_null('auth', 'oauth_clients', 'grant_types', 'oauth_clients.grant_types is NOT NULL');
select col_not_null('auth', 'oauth_clients', 'token_endpoint_auth_method',
  'oauth_clients.token_endpoint_auth_method is NOT NULL');
select col_hasnt_default('auth', 'oauth_clients', 'registration_type', 'oauth_clients.registration_type has no default');
select col_hasnt_default('auth', 'oauth_clients', 'redirect_uris', 'oauth_clients.redirect_uris has no default');
select col_hasnt_default('auth', 'oauth_clients', 'grant_types', 'oauth_clients.grant_types has no default');
select col_hasnt_default('auth', 'oauth_clients', 'token_endpoint_auth_method',
  'oauth_clients.token_endpoint_auth_method has no default');
select col_is_null('auth', 'oauth_clients', 'client_secret_hash', 'a public client has no secret hash');
select throws_ok($$ insert into auth.oauth_clients (id, client_name) values (gen_random_uuid(), 'Fixture') $$,
  '23502', null, 'a client given only an id and a name is refused, as on Supabase');
select lives_ok($$
  insert into auth.oauth_clients (id, client_name, registration_type, client_type, redirect_uris, grant_types,
                                  token_endpoint_auth_method)
  values (gen_random_uuid(), 'Registered', 'dynamic', 'public', 'http://127.0.0.1:33418/callback',
          'authorization_code,refresh_token', 'none') $$,
  'a client registered with every required column is accepted');

-- The tables Supabase Auth keeps grants and sign-ins in exist.
select has_table('auth', 'identities', 'auth.identities exists');
select has_table('auth', 'refresh_tokens', 'auth.refresh_tokens exists');
select has_table('auth', 'oauth_authorizations', 'auth.oauth_authorizations exists');

-- Row-level security on Auth's tables, with no policy: only roles that bypass RLS (or
-- own the tables) see their rows.
select is(
  array(select c.relname::text from pg_class c
        where c.relnamespace = 'auth'::regnamespace and c.relkind = 'r' and c.relrowsecurity
          and c.relname in ('users', 'sessions', 'identities', 'refresh_tokens')
        order by 1),
  array['identities', 'refresh_tokens', 'sessions', 'users'],
  'RLS is enabled on auth.users, sessions, identities and refresh_tokens');
select is_empty($$ select tablename from pg_policies where schemaname = 'auth' $$, 'no auth table has a policy');

-- Roles.
select is(
  array(select rolname::text from pg_roles where rolname in ('anon', 'authenticated', 'service_role') and rolinherit
        order by 1),
  array['anon', 'authenticated', 'service_role'],
  'anon, authenticated and service_role inherit');
select is((select rolinherit from pg_roles where rolname = 'authenticator'), false, 'authenticator does not inherit');
select ok((select 'statement_timeout=8s' = any (rolconfig) from pg_roles where rolname = 'authenticator'),
  'authenticator''s statement_timeout is 8s');
select ok((select 'statement_timeout=3s' = any (rolconfig) from pg_roles where rolname = 'anon'),
  'anon''s statement_timeout is 3s');
select ok((select 'statement_timeout=8s' = any (rolconfig) from pg_roles where rolname = 'authenticated'),
  'authenticated''s statement_timeout is 8s');
select ok((select not rolsuper and rolbypassrls from pg_roles where rolname = 'postgres'),
  'postgres is no superuser but bypasses RLS');

-- The auth schema: supabase_admin's, Auth's role owns the tables, postgres may only use them.
select is((select pg_get_userbyid(nspowner)::text from pg_namespace where nspname = 'auth'), 'supabase_admin',
  'the auth schema is owned by supabase_admin');
select is_empty($$
  select c.relname from pg_class c
  where c.relnamespace = 'auth'::regnamespace and c.relkind = 'r'
    and c.relname in ('users', 'sessions', 'identities', 'refresh_tokens', 'oauth_clients', 'oauth_consents',
                      'oauth_authorizations')
    and pg_get_userbyid(c.relowner) <> 'supabase_auth_admin'
$$, 'Auth''s tables are owned by supabase_auth_admin');
select ok(not has_schema_privilege('postgres', 'auth', 'CREATE'), 'postgres cannot create objects in auth');
select ok(not pg_has_role('postgres', 'supabase_auth_admin', 'MEMBER'),
  'postgres is not a member of supabase_auth_admin (it cannot alter or drop Auth''s tables)');

select * from finish();
rollback;
