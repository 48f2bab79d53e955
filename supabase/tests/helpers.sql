-- =============================================================================
-- pgTAP helpers (test databases only), in the manner of basejump's
-- supabase-test-helpers: create users and act as PostgREST would for each of them.
-- =============================================================================
-- Applied by `scripts/db.sh reset-test` as the bootstrap superuser, before pg_prove runs
-- the NN-topic.test.sql files as the migration role `postgres`.

create schema if not exists tests;
grant usage on schema tests to public;

-- The tests switch to the relay's role to prove what it can and cannot do; pgTAP's
-- functions (in `extensions`) must stay callable while they do. pgTAP owns no table of ours.
grant whereabot_relay to postgres;
grant usage on schema extensions to whereabot_relay;

-- A user in auth.users with a live session; identifier is the test's name for them.
create or replace function tests.create_supabase_user(
  identifier text, email text default null, full_name text default null)
returns uuid
language plpgsql
security definer
set search_path = ''
as $$
declare
  v_user uuid := gen_random_uuid();
begin
  insert into auth.users (id, aud, role, email, raw_app_meta_data, raw_user_meta_data, created_at, updated_at)
  values (v_user, 'authenticated', 'authenticated',
          coalesce(email, identifier || '@test.example'),
          '{"provider": "email"}',
          jsonb_build_object('test_identifier', identifier, 'full_name', coalesce(full_name, initcap(identifier))),
          now(), now());
  insert into auth.sessions (id, user_id, created_at, updated_at, aal)
  values (gen_random_uuid(), v_user, now(), now(), 'aal1');
  return v_user;
end;
$$;

-- An OAuth client registered as Supabase Auth does (a public client of dynamic
-- registration): every column real Supabase requires, which has no default there.
create or replace function tests.create_oauth_client(
  p_id uuid, p_name text, p_deleted_at timestamptz default null)
returns uuid
language sql
security definer
set search_path = ''
as $$
  insert into auth.oauth_clients (id, client_name, registration_type, client_type, redirect_uris, grant_types,
                                  token_endpoint_auth_method, deleted_at)
  values (p_id, p_name, 'dynamic', 'public', 'http://127.0.0.1:33418/callback', 'authorization_code,refresh_token',
          'none', p_deleted_at)
  returning id
$$;

create or replace function tests.get_supabase_uid(identifier text)
returns uuid
language sql
stable
security definer
set search_path = ''
as $$
  select id from auth.users where raw_user_meta_data ->> 'test_identifier' = identifier
$$;

create or replace function tests.get_session_id(identifier text)
returns uuid
language sql
stable
security definer
set search_path = ''
as $$
  select s.id from auth.sessions s join auth.users u on u.id = s.user_id
  where u.raw_user_meta_data ->> 'test_identifier' = identifier
  order by s.created_at limit 1
$$;

-- The claims PostgREST sets for a Supabase access token of this user. With client_id,
-- the token is an OAuth access token issued to that agent.
create or replace function tests.claims_for(identifier text, client_id text default null)
returns jsonb
language sql
stable
security definer
set search_path = ''
as $$
  select jsonb_strip_nulls(jsonb_build_object(
    'sub', u.id, 'role', 'authenticated', 'aud', 'authenticated', 'email', u.email,
    'session_id', tests.get_session_id(identifier), 'client_id', client_id))
  from auth.users u where u.raw_user_meta_data ->> 'test_identifier' = identifier
$$;

-- Acts as PostgREST does for a request: switch role, set the verified claims.
create or replace function tests.act_as(role_name text, claims jsonb)
returns void
language plpgsql
as $$
begin
  perform set_config('role', role_name, true);
  perform set_config('request.jwt.claims', coalesce(claims::text, ''), true);
end;
$$;

-- As the user's own session (the phone app).
create or replace function tests.authenticate_as(identifier text)
returns void
language plpgsql
as $$
begin
  if tests.get_supabase_uid(identifier) is null then
    raise exception 'tests.authenticate_as: no test user %', identifier;
  end if;
  perform tests.act_as('authenticated', tests.claims_for(identifier));
end;
$$;

-- As an agent's OAuth access token for the user (claims carry client_id).
create or replace function tests.authenticate_as_agent(
  identifier text, client_id text default '6f1d0c1e-5b1a-4c1e-9a55-0a9f3c1e7b21')
returns void
language plpgsql
as $$
begin
  if tests.get_supabase_uid(identifier) is null then
    raise exception 'tests.authenticate_as_agent: no test user %', identifier;
  end if;
  perform tests.act_as('authenticated', tests.claims_for(identifier, client_id));
end;
$$;

-- As the anon key (no user).
create or replace function tests.clear_authentication()
returns void
language sql
as $$ select tests.act_as('anon', '{"role": "anon"}') $$;

-- As the service role key.
create or replace function tests.authenticate_as_service_role()
returns void
language sql
as $$ select tests.act_as('service_role', '{"role": "service_role"}') $$;

-- As the relay's database role (no JWT at all).
create or replace function tests.authenticate_as_relay()
returns void
language sql
as $$ select tests.act_as('whereabot_relay', null) $$;

-- One socket's hello through relay.device_hellos (the relay has no single-socket form):
-- {status, pending}, pending being the locate messages of the pings waiting for the user.
-- Security invoker, so it proves what the calling role (the relay's) may do.
create or replace function tests.device_hello(
  p_instance text, p_connection uuid, p_user uuid, p_session uuid, p_device uuid,
  p_name text, p_platform text, p_app_version text, p_opened_at timestamptz, p_max_sockets int default 20)
returns jsonb
language sql
as $$
  select jsonb_build_object(
    'status', r -> 'results' -> 0 ->> 'status',
    'pending', coalesce((select jsonb_agg(p -> 'message') from jsonb_array_elements(r -> 'pending') p), '[]'::jsonb))
  from relay.device_hellos(p_instance, jsonb_build_array(jsonb_build_object(
    'connection', p_connection, 'user', p_user, 'session', p_session, 'device', p_device, 'name', p_name,
    'platform', p_platform, 'app_version', p_app_version, 'opened_at', p_opened_at)), p_max_sockets) r
$$;

grant execute on all functions in schema tests to public;
