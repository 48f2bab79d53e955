-- =============================================================================
-- Local Supabase shim: the auth schema
-- =============================================================================
-- The parts of Supabase Auth (GoTrue) that Whereabot's migrations, relay, tests and the
-- stand-in auth server (auth/standin) use, in the shape Supabase Auth's own migrations
-- leave them: the same columns, types, NOT NULLs, defaults (and the lack of them),
-- constraints, indexes, owners, grants and row-level security. A fixture that would fail
-- on Supabase fails here too. supabase/tests/51-supabase-shape.test.sql checks what
-- matters most.
--
-- Re-runnable, and applied again to databases an older shim built: tables are created if
-- missing and then brought to the same shape (columns added, defaults dropped,
-- constraints renamed or added, indexes created).
--
-- Deliberately not here: Auth's other tables (instances, audit_log_entries, mfa_*, sso_*,
-- saml_*, flow_state, one_time_tokens, webauthn_*, custom_oauth_providers,
-- oauth_client_states, schema_migrations) and its enums for them; dashboard_user.

-- Owned by the bootstrap superuser, as on Supabase; Auth's role has every privilege on
-- it, the migration role and the API roles may only use it.
create schema if not exists auth authorization supabase_admin;
alter schema auth owner to supabase_admin;
grant all on schema auth to supabase_auth_admin;
grant usage on schema auth to postgres, anon, authenticated, service_role;
revoke create on schema auth from postgres;

-- Helpers for this run only (pg_temp): add a named constraint when it is missing, and
-- give a constraint an older shim created under another name Supabase's name.
create or replace function pg_temp.ensure_constraint(p_table regclass, p_name text, p_definition text)
returns void
language plpgsql
as $$
begin
  if exists (select from pg_constraint c where c.conrelid = p_table and c.conname = p_name) then
    return;
  end if;
  begin
    execute format('alter table %s add constraint %I %s', p_table, p_name, p_definition);
  exception when check_violation or foreign_key_violation then
    -- Rows an older, looser shim let in: keep them, check new rows only.
    raise warning 'auth shim: existing rows of % break %; added NOT VALID', p_table, p_name;
    execute format('alter table %s add constraint %I %s not valid', p_table, p_name, p_definition);
  end;
end;
$$;

create or replace function pg_temp.rename_constraint(p_table regclass, p_old text, p_new text)
returns void
language plpgsql
as $$
begin
  if exists (select from pg_constraint c where c.conrelid = p_table and c.conname = p_old)
     and not exists (select from pg_constraint c where c.conrelid = p_table and c.conname = p_new) then
    execute format('alter table %s rename constraint %I to %I', p_table, p_old, p_new);
  end if;
end;
$$;

-- -----------------------------------------------------------------------------
-- Enums
-- -----------------------------------------------------------------------------
do $$
declare
  wanted constant jsonb := jsonb_build_object(
    'aal_level', jsonb_build_array('aal1', 'aal2', 'aal3'),
    'code_challenge_method', jsonb_build_array('s256', 'plain'),
    'oauth_registration_type', jsonb_build_array('dynamic', 'manual'),
    'oauth_client_type', jsonb_build_array('public', 'confidential'),
    'oauth_authorization_status', jsonb_build_array('pending', 'approved', 'denied', 'expired'),
    'oauth_response_type', jsonb_build_array('code'));
  type_name text;
begin
  for type_name in select jsonb_object_keys(wanted) loop
    if not exists (select from pg_type t where t.typnamespace = 'auth'::regnamespace and t.typname = type_name) then
      execute format('create type auth.%I as enum (%s)', type_name,
                     (select string_agg(quote_literal(label), ', ')
                      from jsonb_array_elements_text(wanted -> type_name) label));
    end if;
    execute format('alter type auth.%I owner to supabase_auth_admin', type_name);
  end loop;
end
$$;

-- -----------------------------------------------------------------------------
-- auth.users
-- -----------------------------------------------------------------------------
create table if not exists auth.users (
  instance_id uuid,
  id uuid not null,
  aud varchar(255),
  role varchar(255),
  email varchar(255),
  encrypted_password varchar(255),
  email_confirmed_at timestamptz,
  invited_at timestamptz,
  confirmation_token varchar(255),
  confirmation_sent_at timestamptz,
  recovery_token varchar(255),
  recovery_sent_at timestamptz,
  email_change_token_new varchar(255),
  email_change varchar(255),
  email_change_sent_at timestamptz,
  last_sign_in_at timestamptz,
  raw_app_meta_data jsonb,
  raw_user_meta_data jsonb,
  is_super_admin boolean,
  created_at timestamptz,
  updated_at timestamptz,
  -- varchar(15) on Supabase until Auth made them text; their defaults kept the old type.
  phone text default null::varchar,
  phone_confirmed_at timestamptz default null,
  phone_change text default ''::varchar,
  phone_change_token varchar(255) default '',
  phone_change_sent_at timestamptz default null,
  confirmed_at timestamptz generated always as (least(email_confirmed_at, phone_confirmed_at)) stored,
  email_change_token_current varchar(255) default '',
  email_change_confirm_status smallint default 0,
  banned_until timestamptz,
  reauthentication_token varchar(255) default '',
  reauthentication_sent_at timestamptz default null,
  is_sso_user boolean not null default false,
  deleted_at timestamptz,
  is_anonymous boolean not null default false,
  constraint users_pkey primary key (id),
  constraint users_phone_key unique (phone),
  constraint users_email_change_confirm_status_check
    check (email_change_confirm_status >= 0 and email_change_confirm_status <= 2)
);
alter table auth.users alter column phone set default null::varchar;
alter table auth.users alter column phone_change set default ''::varchar;
select pg_temp.ensure_constraint('auth.users', 'users_email_change_confirm_status_check',
  'check (email_change_confirm_status >= 0 and email_change_confirm_status <= 2)');
create index if not exists users_instance_id_idx on auth.users (instance_id);
create index if not exists users_instance_id_email_idx on auth.users (instance_id, lower(email));
-- Sign-in and recovery tokens are unique unless blank or a numeric one-time code.
create unique index if not exists confirmation_token_idx on auth.users (confirmation_token)
  where confirmation_token !~ '^[0-9 ]*$';
create unique index if not exists recovery_token_idx on auth.users (recovery_token)
  where recovery_token !~ '^[0-9 ]*$';
create unique index if not exists email_change_token_current_idx on auth.users (email_change_token_current)
  where email_change_token_current !~ '^[0-9 ]*$';
create unique index if not exists email_change_token_new_idx on auth.users (email_change_token_new)
  where email_change_token_new !~ '^[0-9 ]*$';
create unique index if not exists reauthentication_token_idx on auth.users (reauthentication_token)
  where reauthentication_token !~ '^[0-9 ]*$';
-- One non-SSO account per email; SSO accounts may share one.
create unique index if not exists users_email_partial_key on auth.users (email) where (is_sso_user = false);
create index if not exists users_is_anonymous_idx on auth.users (is_anonymous);

-- -----------------------------------------------------------------------------
-- auth.oauth_clients (Supabase's OAuth 2.1 server)
-- -----------------------------------------------------------------------------
-- `id` is the public client_id that appears in access tokens' `client_id` claim.
-- registration_type, redirect_uris, grant_types and token_endpoint_auth_method are
-- NOT NULL with no default, as on Supabase: whoever registers a client names them.
create table if not exists auth.oauth_clients (
  id uuid not null,
  client_secret_hash text,
  registration_type auth.oauth_registration_type not null,
  redirect_uris text not null,
  grant_types text not null,
  client_name text,
  client_uri text,
  logo_uri text,
  created_at timestamptz not null default now(),
  updated_at timestamptz not null default now(),
  deleted_at timestamptz,
  client_type auth.oauth_client_type not null default 'confidential',
  token_endpoint_auth_method text not null
    constraint oauth_clients_token_endpoint_auth_method_check
    check (token_endpoint_auth_method in ('client_secret_basic', 'client_secret_post', 'none')),
  constraint oauth_clients_pkey primary key (id),
  constraint oauth_clients_client_name_length check (char_length(client_name) <= 1024),
  constraint oauth_clients_client_uri_length check (char_length(client_uri) <= 2048),
  constraint oauth_clients_logo_uri_length check (char_length(logo_uri) <= 2048)
);
-- An older shim gave these defaults and no token_endpoint_auth_method; existing clients
-- get the method Supabase's own migration gave them (by client_type).
alter table auth.oauth_clients alter column registration_type drop default;
alter table auth.oauth_clients alter column redirect_uris drop default;
alter table auth.oauth_clients alter column grant_types drop default;
alter table auth.oauth_clients alter column client_secret_hash drop not null;
alter table auth.oauth_clients add column if not exists token_endpoint_auth_method text
  constraint oauth_clients_token_endpoint_auth_method_check
  check (token_endpoint_auth_method in ('client_secret_basic', 'client_secret_post', 'none'));
update auth.oauth_clients
  set token_endpoint_auth_method = case when client_type = 'public' then 'none' else 'client_secret_basic' end
  where token_endpoint_auth_method is null;
alter table auth.oauth_clients alter column token_endpoint_auth_method set not null;
select pg_temp.rename_constraint('auth.oauth_clients', 'oauth_clients_client_name_check', 'oauth_clients_client_name_length');
select pg_temp.rename_constraint('auth.oauth_clients', 'oauth_clients_client_uri_check', 'oauth_clients_client_uri_length');
select pg_temp.rename_constraint('auth.oauth_clients', 'oauth_clients_logo_uri_check', 'oauth_clients_logo_uri_length');
create index if not exists oauth_clients_deleted_at_idx on auth.oauth_clients (deleted_at);

-- -----------------------------------------------------------------------------
-- auth.sessions
-- -----------------------------------------------------------------------------
create table if not exists auth.sessions (
  id uuid not null,
  user_id uuid not null,
  created_at timestamptz,
  updated_at timestamptz,
  factor_id uuid,
  aal auth.aal_level,
  not_after timestamptz,
  refreshed_at timestamp,
  user_agent text,
  ip inet,
  tag text,
  oauth_client_id uuid,
  refresh_token_hmac_key text,
  refresh_token_counter bigint,
  scopes text,
  constraint sessions_pkey primary key (id),
  constraint sessions_user_id_fkey foreign key (user_id) references auth.users (id) on delete cascade,
  constraint sessions_oauth_client_id_fkey foreign key (oauth_client_id)
    references auth.oauth_clients (id) on delete cascade,
  constraint sessions_scopes_length check (char_length(scopes) <= 4096)
);
alter table auth.sessions
  add column if not exists refresh_token_hmac_key text,
  add column if not exists refresh_token_counter bigint,
  add column if not exists scopes text;
select pg_temp.ensure_constraint('auth.sessions', 'sessions_scopes_length', 'check (char_length(scopes) <= 4096)');
create index if not exists user_id_created_at_idx on auth.sessions (user_id, created_at);
create index if not exists sessions_user_id_idx on auth.sessions (user_id);
-- relay.revoked_connections finds sessions that just expired by it.
create index if not exists sessions_not_after_idx on auth.sessions (not_after desc);
create index if not exists sessions_oauth_client_id_idx on auth.sessions (oauth_client_id);

-- -----------------------------------------------------------------------------
-- auth.identities: a user's sign-in identities (email, phone, OAuth providers)
-- -----------------------------------------------------------------------------
create table if not exists auth.identities (
  provider_id text not null,
  user_id uuid not null,
  identity_data jsonb not null,
  provider text not null,
  last_sign_in_at timestamptz,
  created_at timestamptz,
  updated_at timestamptz,
  email text generated always as (lower(identity_data ->> 'email')) stored,
  id uuid not null default gen_random_uuid(),
  constraint identities_pkey primary key (id),
  constraint identities_provider_id_provider_unique unique (provider_id, provider),
  constraint identities_user_id_fkey foreign key (user_id) references auth.users (id) on delete cascade
);
create index if not exists identities_user_id_idx on auth.identities (user_id);
create index if not exists identities_email_idx on auth.identities (email text_pattern_ops);

-- -----------------------------------------------------------------------------
-- auth.refresh_tokens: one row per issued refresh token, chained by parent
-- -----------------------------------------------------------------------------
create table if not exists auth.refresh_tokens (
  instance_id uuid,
  id bigserial not null,
  token varchar(255),
  user_id varchar(255),
  revoked boolean,
  created_at timestamptz,
  updated_at timestamptz,
  parent varchar(255),
  session_id uuid,
  constraint refresh_tokens_pkey primary key (id),
  constraint refresh_tokens_token_unique unique (token),
  constraint refresh_tokens_session_id_fkey foreign key (session_id) references auth.sessions (id) on delete cascade
);
create index if not exists refresh_tokens_instance_id_idx on auth.refresh_tokens (instance_id);
create index if not exists refresh_tokens_instance_id_user_id_idx on auth.refresh_tokens (instance_id, user_id);
create index if not exists refresh_tokens_parent_idx on auth.refresh_tokens (parent);
create index if not exists refresh_tokens_session_id_revoked_idx on auth.refresh_tokens (session_id, revoked);
create index if not exists refresh_tokens_updated_at_idx on auth.refresh_tokens (updated_at desc);

-- -----------------------------------------------------------------------------
-- auth.oauth_authorizations: pending and approved authorization requests and codes
-- -----------------------------------------------------------------------------
create table if not exists auth.oauth_authorizations (
  id uuid not null,
  authorization_id text not null,
  client_id uuid not null,
  user_id uuid,
  redirect_uri text not null,
  scope text not null,
  state text,
  resource text,
  code_challenge text,
  code_challenge_method auth.code_challenge_method,
  response_type auth.oauth_response_type not null default 'code',
  status auth.oauth_authorization_status not null default 'pending',
  authorization_code text,
  created_at timestamptz not null default now(),
  expires_at timestamptz not null default (now() + interval '3 minutes'),
  approved_at timestamptz,
  nonce text,
  constraint oauth_authorizations_pkey primary key (id),
  constraint oauth_authorizations_authorization_id_key unique (authorization_id),
  constraint oauth_authorizations_authorization_code_key unique (authorization_code),
  constraint oauth_authorizations_client_id_fkey foreign key (client_id)
    references auth.oauth_clients (id) on delete cascade,
  constraint oauth_authorizations_user_id_fkey foreign key (user_id) references auth.users (id) on delete cascade,
  constraint oauth_authorizations_redirect_uri_length check (char_length(redirect_uri) <= 2048),
  constraint oauth_authorizations_scope_length check (char_length(scope) <= 4096),
  constraint oauth_authorizations_state_length check (char_length(state) <= 4096),
  constraint oauth_authorizations_resource_length check (char_length(resource) <= 2048),
  constraint oauth_authorizations_code_challenge_length check (char_length(code_challenge) <= 128),
  constraint oauth_authorizations_authorization_code_length check (char_length(authorization_code) <= 255),
  constraint oauth_authorizations_expires_at_future check (expires_at > created_at),
  constraint oauth_authorizations_nonce_length check (char_length(nonce) <= 255)
);
create index if not exists oauth_auth_pending_exp_idx on auth.oauth_authorizations (expires_at)
  where status = 'pending';

-- -----------------------------------------------------------------------------
-- auth.oauth_consents: what each user granted each client
-- -----------------------------------------------------------------------------
create table if not exists auth.oauth_consents (
  id uuid not null,
  user_id uuid not null,
  client_id uuid not null,
  scopes text not null,
  granted_at timestamptz not null default now(),
  revoked_at timestamptz,
  constraint oauth_consents_pkey primary key (id),
  constraint oauth_consents_user_id_fkey foreign key (user_id) references auth.users (id) on delete cascade,
  constraint oauth_consents_client_id_fkey foreign key (client_id) references auth.oauth_clients (id) on delete cascade,
  constraint oauth_consents_user_client_unique unique (user_id, client_id),
  constraint oauth_consents_scopes_length check (char_length(scopes) <= 2048),
  constraint oauth_consents_scopes_not_empty check (char_length(trim(scopes)) > 0),
  constraint oauth_consents_revoked_after_granted check (revoked_at is null or revoked_at >= granted_at)
);
select pg_temp.rename_constraint('auth.oauth_consents', 'oauth_consents_scopes_check', 'oauth_consents_scopes_length');
select pg_temp.rename_constraint('auth.oauth_consents', 'oauth_consents_user_id_client_id_key', 'oauth_consents_user_client_unique');
select pg_temp.ensure_constraint('auth.oauth_consents', 'oauth_consents_scopes_not_empty', 'check (char_length(trim(scopes)) > 0)');
select pg_temp.ensure_constraint('auth.oauth_consents', 'oauth_consents_revoked_after_granted',
  'check (revoked_at is null or revoked_at >= granted_at)');
create index if not exists oauth_consents_active_user_client_idx on auth.oauth_consents (user_id, client_id)
  where revoked_at is null;
create index if not exists oauth_consents_user_order_idx on auth.oauth_consents (user_id, granted_at desc);
create index if not exists oauth_consents_active_client_idx on auth.oauth_consents (client_id)
  where revoked_at is null;

-- -----------------------------------------------------------------------------
-- Owners, row-level security, grants
-- -----------------------------------------------------------------------------
alter table auth.users owner to supabase_auth_admin;
alter table auth.sessions owner to supabase_auth_admin;
alter table auth.identities owner to supabase_auth_admin;
alter table auth.refresh_tokens owner to supabase_auth_admin;
alter table auth.oauth_clients owner to supabase_auth_admin;
alter table auth.oauth_authorizations owner to supabase_auth_admin;
alter table auth.oauth_consents owner to supabase_auth_admin;

-- RLS enabled with no policy, as Supabase Auth does for its older tables: an API role
-- that were ever granted a privilege on them would still see no row. (Auth leaves it off
-- on the oauth_* tables; so does this shim.)
alter table auth.users enable row level security;
alter table auth.sessions enable row level security;
alter table auth.identities enable row level security;
alter table auth.refresh_tokens enable row level security;

-- As on hosted Supabase, the migration role (postgres, which bypasses RLS) can read and
-- manage auth data, and grant reading Auth's older tables on; the API roles hold nothing.
grant all on auth.users, auth.sessions, auth.identities, auth.refresh_tokens, auth.oauth_clients,
  auth.oauth_authorizations, auth.oauth_consents to postgres;
grant all on sequence auth.refresh_tokens_id_seq to postgres;
grant select on auth.users, auth.sessions, auth.identities, auth.refresh_tokens to postgres with grant option;
alter default privileges for role supabase_auth_admin in schema auth grant all on tables to postgres;
alter default privileges for role supabase_auth_admin in schema auth grant all on sequences to postgres;
alter default privileges for role supabase_auth_admin in schema auth grant all on routines to postgres;

-- -----------------------------------------------------------------------------
-- auth.uid(), auth.role(), auth.email(), auth.jwt(): Supabase's definitions
-- -----------------------------------------------------------------------------
-- PostgREST puts the verified JWT claims in `request.jwt.claims` (and, in older
-- versions, one setting per claim); '' counts as unset.
create or replace function auth.uid() returns uuid
language sql stable
as $$
  select coalesce(
    nullif(current_setting('request.jwt.claim.sub', true), ''),
    (nullif(current_setting('request.jwt.claims', true), '')::jsonb ->> 'sub')
  )::uuid
$$;

create or replace function auth.role() returns text
language sql stable
as $$
  select coalesce(
    nullif(current_setting('request.jwt.claim.role', true), ''),
    (nullif(current_setting('request.jwt.claims', true), '')::jsonb ->> 'role')
  )::text
$$;

create or replace function auth.email() returns text
language sql stable
as $$
  select coalesce(
    nullif(current_setting('request.jwt.claim.email', true), ''),
    (nullif(current_setting('request.jwt.claims', true), '')::jsonb ->> 'email')
  )::text
$$;

create or replace function auth.jwt() returns jsonb
language sql stable
as $$
  select coalesce(
    nullif(current_setting('request.jwt.claim', true), ''),
    nullif(current_setting('request.jwt.claims', true), '')
  )::jsonb
$$;

alter function auth.uid() owner to supabase_auth_admin;
alter function auth.role() owner to supabase_auth_admin;
alter function auth.email() owner to supabase_auth_admin;
alter function auth.jwt() owner to supabase_auth_admin;
grant execute on function auth.uid(), auth.role(), auth.email(), auth.jwt()
  to postgres, anon, authenticated, service_role;
