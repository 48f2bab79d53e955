-- =============================================================================
-- The relay as the agents' OAuth 2.1 authorization server (docs/agents.md, "Signing in")
-- =============================================================================
-- What the relay's /oauth/* endpoints keep, only as digests: registered clients (RFC 7591)
-- and the client metadata documents it has fetched (CIMD), authorization requests waiting
-- for consent and their codes (60 s, single use), and token families — one per code
-- redeemed, the "session" an access token names in `session_id` — with their refresh
-- tokens (rotated at every use; a reused one revokes its family). Access tokens are signed
-- by the relay and not stored. The relay's role reaches all of it through relay.oauth_*.
create table private.oauth_clients (
  client_id text primary key check (char_length(client_id) between 1 and 255),
  kind text not null check (kind in ('registered', 'document')),
  client_name text not null default '' check (char_length(client_name) <= 200),
  redirect_uris text[] not null check (cardinality(redirect_uris) between 1 and 10),
  grant_types text[] not null default '{authorization_code}'
    check (grant_types <@ array['authorization_code', 'refresh_token']),
  auth_method text not null default 'none'
    check (auth_method in ('none', 'client_secret_post', 'client_secret_basic')),
  secret_digest bytea check (octet_length(secret_digest) = 32),
  registered_from text check (char_length(registered_from) <= 64),
  created_at timestamptz not null default now(),
  last_used_at timestamptz not null default now(),
  constraint oauth_clients_secret_with_method check ((auth_method = 'none') = (secret_digest is null))
);
comment on table private.oauth_clients is
  'OAuth clients the relay knows: registered (RFC 7591; secrets as SHA-256) or fetched client metadata documents.';
alter table private.oauth_clients enable row level security;
create index oauth_clients_registered_from on private.oauth_clients (registered_from, created_at)
  where kind = 'registered';
comment on index private.oauth_clients_registered_from is
  'relay.oauth_register_client: the clients one address registered in the last hour.';

create unlogged table private.oauth_authorizations (
  id uuid primary key,
  client_id text not null check (char_length(client_id) between 1 and 255),
  client_name text not null check (char_length(client_name) <= 200),
  client_host text not null check (char_length(client_host) <= 255),
  redirect_uri text not null check (char_length(redirect_uri) between 1 and 2000),
  code_challenge text not null check (code_challenge ~ '^[A-Za-z0-9_-]{43}$'),
  state text check (char_length(state) <= 1000),
  scope text not null check (scope ~ '^[a-z_]+( [a-z_]+)*$' and char_length(scope) <= 100),
  resource text not null check (char_length(resource) between 1 and 2000),
  created_at timestamptz not null default now(),
  expires_at timestamptz not null,
  user_id uuid,
  grant_id uuid,
  code_digest bytea unique check (octet_length(code_digest) = 32),
  used_at timestamptz,
  family_id uuid
);
comment on table private.oauth_authorizations is
  'Authorization requests waiting for consent, then their code (as SHA-256; 60 s, single use). Lost in a crash, as they may be.';
alter table private.oauth_authorizations enable row level security;
create index oauth_authorizations_expiry on private.oauth_authorizations (expires_at);
comment on index private.oauth_authorizations_code_digest_key is
  'relay.oauth_redeem_code: a code by its digest (and no digest twice).';
comment on index private.oauth_authorizations_expiry is
  'relay.oauth_begin''s count of the requests waiting, and relay.sweep_oauth: the expired ones.';
create index oauth_authorizations_client on private.oauth_authorizations (client_id, expires_at);
comment on index private.oauth_authorizations_client is
  'relay.oauth_begin''s count of one client''s undecided requests.';

create table private.oauth_families (
  id uuid primary key,
  grant_id uuid not null references public.oauth_grants (id) on delete cascade,
  resource text not null check (char_length(resource) between 1 and 2000),
  scope text not null check (char_length(scope) <= 100),
  created_at timestamptz not null default now(),
  expires_at timestamptz not null,
  revoked_at timestamptz
);
comment on table private.oauth_families is
  'Token families: one per code redeemed; access tokens name one in session_id, and it ends with its grant, a revoke or a reused refresh token.';
alter table private.oauth_families enable row level security;
create index oauth_families_grant on private.oauth_families (grant_id);
create index oauth_families_expiry on private.oauth_families (expires_at);
comment on index private.oauth_families_grant is
  'Deleting a grant (cascade: relay.oauth_disconnect, stop_all_sharing, the person''s own delete) ends its families.';
comment on index private.oauth_families_expiry is 'relay.sweep_oauth: the families past their life.';

create table private.oauth_refresh_tokens (
  digest bytea primary key check (octet_length(digest) = 32),
  family_id uuid not null references private.oauth_families (id) on delete cascade,
  created_at timestamptz not null default now(),
  used_at timestamptz
);
comment on table private.oauth_refresh_tokens is
  'Refresh tokens as SHA-256: the live one of a family has no used_at; used ones are kept to detect reuse.';
alter table private.oauth_refresh_tokens enable row level security;
create index oauth_refresh_tokens_family on private.oauth_refresh_tokens (family_id);
comment on index private.oauth_refresh_tokens_family is
  'Deleting a family (cascade: a grant deleted, relay.sweep_oauth) deletes its refresh tokens.';

-- -----------------------------------------------------------------------------
-- relay.oauth_register_client(...) → registered | address_full | full
-- -----------------------------------------------------------------------------
-- Dynamic registration, bounded: at most 20 clients per address (the relay's budget key)
-- an hour and 10,000 registered clients in all (unused ones are swept by relay.sweep_oauth).
create or replace function relay.oauth_register_client(
  p_client_id text, p_name text, p_redirect_uris text[], p_grant_types text[], p_auth_method text,
  p_secret_digest bytea, p_from text)
returns text
language plpgsql
security definer
set search_path = ''
as $$
begin
  if p_client_id is null or p_client_id !~ '^wbc_[0-9a-f]{32}$' then
    raise exception 'a registered client id is wbc_ and 32 hex digits' using errcode = '22023';
  end if;
  if (select count(*) from private.oauth_clients c
      where c.kind = 'registered' and c.registered_from = p_from and c.created_at > now() - interval '1 hour') >= 20 then
    return 'address_full';
  end if;
  if (select count(*) from private.oauth_clients c where c.kind = 'registered') >= 10000 then
    return 'full';
  end if;
  insert into private.oauth_clients (client_id, kind, client_name, redirect_uris, grant_types, auth_method,
                                     secret_digest, registered_from)
  values (p_client_id, 'registered', coalesce(p_name, ''), p_redirect_uris, p_grant_types, p_auth_method,
          p_secret_digest, p_from);
  return 'registered';
end;
$$;
comment on function relay.oauth_register_client(text, text, text[], text[], text, bytea, text) is
  'Registers an OAuth client (RFC 7591) unless its address registered 20 in the last hour or 10,000 exist.';

-- -----------------------------------------------------------------------------
-- relay.oauth_remember_document(...) → the client a fetched metadata document describes
-- -----------------------------------------------------------------------------
create or replace function relay.oauth_remember_document(
  p_client_id text, p_name text, p_redirect_uris text[], p_grant_types text[], p_auth_method text)
returns void
language plpgsql
security definer
set search_path = ''
as $$
begin
  if p_client_id is null or p_client_id !~ '^https://' then
    raise exception 'a client metadata document''s id is an https URL' using errcode = '22023';
  end if;
  if not exists (select from private.oauth_clients c where c.client_id = p_client_id)
     and (select count(*) from private.oauth_clients c where c.kind = 'document') >= 10000 then
    raise exception 'too many client metadata documents are kept' using errcode = '53400';
  end if;
  insert into private.oauth_clients as c (client_id, kind, client_name, redirect_uris, grant_types, auth_method)
  values (p_client_id, 'document', coalesce(p_name, ''), p_redirect_uris, p_grant_types, 'none')
  on conflict (client_id) do update
    set client_name = excluded.client_name, redirect_uris = excluded.redirect_uris,
        grant_types = excluded.grant_types, last_used_at = now()
    where c.kind = 'document';
end;
$$;
comment on function relay.oauth_remember_document(text, text, text[], text[], text) is
  'Keeps what a fetched client metadata document said (its name serves pushes and prompts); at most 10,000 documents (53400 over it).';

-- -----------------------------------------------------------------------------
-- relay.oauth_client(client_id) → the client as jsonb, or null
-- -----------------------------------------------------------------------------
create or replace function relay.oauth_client(p_client_id text)
returns jsonb
language plpgsql
stable
security definer
set search_path = ''
as $$
begin
  if p_client_id is null then
    raise exception 'oauth_client needs a client id' using errcode = '22004';
  end if;
  return (select jsonb_build_object('kind', c.kind, 'client_name', c.client_name,
                                    'redirect_uris', to_jsonb(c.redirect_uris), 'grant_types', to_jsonb(c.grant_types),
                                    'auth_method', c.auth_method, 'secret_digest', encode(c.secret_digest, 'hex'))
          from private.oauth_clients c where c.client_id = p_client_id);
end;
$$;
comment on function relay.oauth_client(text) is
  'A known OAuth client (registered or fetched document): kind, name, redirect URIs, grant types, auth method, secret digest.';

-- -----------------------------------------------------------------------------
-- relay.oauth_begin(...) → ok | client_full | full: an authorization request waiting for consent
-- -----------------------------------------------------------------------------
create or replace function relay.oauth_begin(
  p_id uuid, p_client_id text, p_client_name text, p_client_host text, p_redirect_uri text, p_challenge text,
  p_state text, p_scope text, p_resource text, p_seconds int)
returns text
language plpgsql
security definer
set search_path = ''
as $$
begin
  -- ok, client_full (50 undecided of this client), or full (10,000 waiting in all).
  if p_seconds is null or p_seconds not between 10 and 3600 then
    raise exception 'an authorization request lives 10 to 3600 seconds' using errcode = '22023';
  end if;
  if (select count(*) from private.oauth_authorizations a where a.expires_at > now()) >= 10000 then
    return 'full';
  end if;
  if (select count(*) from private.oauth_authorizations a
      where a.client_id = p_client_id and a.user_id is null and a.expires_at > now()) >= 50 then
    return 'client_full';
  end if;
  insert into private.oauth_authorizations (id, client_id, client_name, client_host, redirect_uri, code_challenge,
                                            state, scope, resource, expires_at)
  values (p_id, p_client_id, coalesce(p_client_name, ''), coalesce(p_client_host, ''), p_redirect_uri, p_challenge,
          p_state, p_scope, p_resource, now() + make_interval(secs => p_seconds));
  update private.oauth_clients c set last_used_at = now()
  where c.client_id = p_client_id and c.last_used_at < now() - interval '1 hour';
  return 'ok';
end;
$$;
comment on function relay.oauth_begin(uuid, text, text, text, text, text, text, text, text, int) is
  'Keeps an authorization request until the person decides (at most 50 undecided per client and 10,000 waiting in all).';

-- -----------------------------------------------------------------------------
-- relay.oauth_consent_request(id) → what the consent page shows, or null
-- -----------------------------------------------------------------------------
create or replace function relay.oauth_consent_request(p_id uuid)
returns jsonb
language plpgsql
stable
security definer
set search_path = ''
as $$
begin
  if p_id is null then
    raise exception 'oauth_consent_request needs a request id' using errcode = '22004';
  end if;
  return (select jsonb_build_object('client_id', a.client_id, 'client_name', a.client_name,
                                    'client_host', a.client_host, 'scope', a.scope)
          from private.oauth_authorizations a
          where a.id = p_id and a.user_id is null and a.expires_at > now());
end;
$$;
comment on function relay.oauth_consent_request(uuid) is
  'An undecided, unexpired authorization request: client id, name, host and scope.';

-- -----------------------------------------------------------------------------
-- relay.oauth_decide(id, user, approve, code digest, code seconds) → {redirect_uri, state}
-- -----------------------------------------------------------------------------
-- Once per request. Approve keeps (or refreshes) the person's grant for the client and
-- the code's digest; deny forgets the request. Null: unknown, expired or decided, or a
-- person who may not sign in (banned or deleted).
create or replace function relay.oauth_decide(p_id uuid, p_user uuid, p_approve boolean, p_code_digest bytea,
                                              p_code_seconds int)
returns jsonb
language plpgsql
security definer
set search_path = ''
as $$
declare
  v_request private.oauth_authorizations;
  v_grant uuid;
begin
  if p_id is null or p_user is null or p_approve is null then
    raise exception 'oauth_decide needs a request, a user and a decision' using errcode = '22004';
  end if;
  if p_approve and (p_code_digest is null or p_code_seconds is null or p_code_seconds not between 1 and 600) then
    raise exception 'an approval needs a code digest and a lifetime of 1 to 600 seconds' using errcode = '22023';
  end if;
  select * into v_request from private.oauth_authorizations a
  where a.id = p_id and a.user_id is null and a.expires_at > now()
  for update;
  if not found or not exists (select from auth.users u where u.id = p_user and u.deleted_at is null
                                and (u.banned_until is null or u.banned_until < now())) then
    return null;
  end if;
  if not p_approve then
    delete from private.oauth_authorizations a where a.id = p_id;
    return jsonb_build_object('redirect_uri', v_request.redirect_uri, 'state', v_request.state);
  end if;
  insert into public.oauth_grants as g (user_id, client_id, client_name, client_host, scope, last_used_at)
  values (p_user, v_request.client_id, v_request.client_name, v_request.client_host, v_request.scope, now())
  on conflict (user_id, client_id) do update
    set client_name = excluded.client_name, client_host = excluded.client_host, scope = excluded.scope,
        last_used_at = now()
  returning g.id into v_grant;
  update private.oauth_authorizations a
  set user_id = p_user, grant_id = v_grant, code_digest = p_code_digest,
      expires_at = now() + make_interval(secs => p_code_seconds)
  where a.id = p_id;
  return jsonb_build_object('redirect_uri', v_request.redirect_uri, 'state', v_request.state);
end;
$$;
comment on function relay.oauth_decide(uuid, uuid, boolean, bytea, int) is
  'The person''s Approve (grant kept, code digest stored) or Deny on an authorization request, once; null when it cannot be decided.';

-- -----------------------------------------------------------------------------
-- relay.oauth_redeem_code(...) → the new family as jsonb, or {error}
-- -----------------------------------------------------------------------------
-- The authorization_code grant. The code must be live, unused and the client's; the
-- redirect URI, the PKCE challenge (the relay passes S256(code_verifier)) and the resource
-- (null: the one of the authorization) must match. A code used twice revokes the family
-- its first use made (RFC 6749 §4.1.2). The refresh token (its digest) is kept only for
-- offline_access or a client that registered the refresh_token grant ('refresh').
create or replace function relay.oauth_redeem_code(
  p_code_digest bytea, p_client_id text, p_redirect_uri text, p_challenge text, p_resource text,
  p_family uuid, p_refresh_digest bytea, p_seconds int)
returns jsonb
language plpgsql
security definer
set search_path = ''
as $$
declare
  v_code private.oauth_authorizations;
  v_email text;
  v_refresh boolean;
begin
  if p_code_digest is null or p_family is null or p_seconds is null or p_seconds not between 60 and 31536000 then
    raise exception 'oauth_redeem_code needs a code digest, a family and a lifetime' using errcode = '22023';
  end if;
  select * into v_code from private.oauth_authorizations a where a.code_digest = p_code_digest for update;
  if not found then
    return jsonb_build_object('error', 'invalid_grant');
  end if;
  if v_code.used_at is not null then
    update private.oauth_families f set revoked_at = now() where f.id = v_code.family_id and f.revoked_at is null;
    return jsonb_build_object('error', 'invalid_grant', 'reused', true);
  end if;
  if v_code.expires_at <= now() or v_code.client_id is distinct from p_client_id
     or v_code.redirect_uri is distinct from p_redirect_uri or v_code.code_challenge is distinct from p_challenge then
    return jsonb_build_object('error', 'invalid_grant');
  end if;
  if p_resource is not null and p_resource <> v_code.resource then
    return jsonb_build_object('error', 'invalid_target');
  end if;
  select u.email::text into v_email from public.oauth_grants g join auth.users u on u.id = g.user_id
  where g.id = v_code.grant_id and u.deleted_at is null and (u.banned_until is null or u.banned_until < now());
  if not found then
    return jsonb_build_object('error', 'invalid_grant');
  end if;
  update private.oauth_authorizations a set used_at = now(), family_id = p_family where a.id = v_code.id;
  insert into private.oauth_families (id, grant_id, resource, scope, expires_at)
  values (p_family, v_code.grant_id, v_code.resource, v_code.scope, now() + make_interval(secs => p_seconds));
  -- Refresh tokens go to offline_access and to clients that registered the grant.
  v_refresh := p_refresh_digest is not null
    and (' ' || v_code.scope || ' ' like '% offline_access %'
         or exists (select from private.oauth_clients c
                    where c.client_id = v_code.client_id and 'refresh_token' = any (c.grant_types)));
  if v_refresh then
    insert into private.oauth_refresh_tokens (digest, family_id) values (p_refresh_digest, p_family);
  end if;
  update public.oauth_grants g set last_used_at = now() where g.id = v_code.grant_id;
  return jsonb_build_object('user_id', v_code.user_id, 'email', v_email, 'family_id', p_family,
                            'client_id', v_code.client_id, 'scope', v_code.scope, 'resource', v_code.resource,
                            'refresh', v_refresh);
end;
$$;
comment on function relay.oauth_redeem_code(bytea, text, text, text, text, uuid, bytea, int) is
  'Redeems an authorization code once (PKCE, redirect URI, resource checked) into a token family; a second use revokes that family.';

-- -----------------------------------------------------------------------------
-- relay.oauth_refresh(digest, client, new digest, lifetime) → the family as jsonb, or {error}
-- -----------------------------------------------------------------------------
-- Rotation: the presented token is marked used and the new one replaces it; a token
-- already used (a copy replayed, or the client's own race) revokes its whole family.
create or replace function relay.oauth_refresh(p_digest bytea, p_client_id text, p_new_digest bytea, p_seconds int)
returns jsonb
language plpgsql
security definer
set search_path = ''
as $$
declare
  v_token private.oauth_refresh_tokens;
  v_family private.oauth_families;
  v_grant public.oauth_grants;
  v_email text;
begin
  if p_digest is null or p_new_digest is null or p_seconds is null or p_seconds not between 60 and 31536000 then
    raise exception 'oauth_refresh needs two digests and a lifetime' using errcode = '22023';
  end if;
  select * into v_token from private.oauth_refresh_tokens t where t.digest = p_digest for update;
  if not found then
    return jsonb_build_object('error', 'invalid_grant');
  end if;
  select * into v_family from private.oauth_families f where f.id = v_token.family_id for update;
  select * into v_grant from public.oauth_grants g where g.id = v_family.grant_id;
  if v_grant.client_id is distinct from p_client_id then
    return jsonb_build_object('error', 'invalid_grant');
  end if;
  if v_token.used_at is not null then
    update private.oauth_families f set revoked_at = now() where f.id = v_family.id and f.revoked_at is null;
    return jsonb_build_object('error', 'invalid_grant', 'reused', true);
  end if;
  if v_family.revoked_at is not null or v_family.expires_at <= now() then
    return jsonb_build_object('error', 'invalid_grant');
  end if;
  select u.email::text into v_email from auth.users u
  where u.id = v_grant.user_id and u.deleted_at is null and (u.banned_until is null or u.banned_until < now());
  if not found then
    return jsonb_build_object('error', 'invalid_grant');
  end if;
  update private.oauth_refresh_tokens t set used_at = now() where t.digest = p_digest;
  insert into private.oauth_refresh_tokens (digest, family_id) values (p_new_digest, v_family.id);
  update private.oauth_families f set expires_at = now() + make_interval(secs => p_seconds) where f.id = v_family.id;
  update public.oauth_grants g set last_used_at = now() where g.id = v_grant.id;
  return jsonb_build_object('user_id', v_grant.user_id, 'email', v_email, 'family_id', v_family.id,
                            'client_id', v_grant.client_id, 'scope', v_family.scope, 'resource', v_family.resource,
                            'refresh', true);
end;
$$;
comment on function relay.oauth_refresh(bytea, text, bytea, int) is
  'Rotates a refresh token of CLIENT: the new digest replaces it and the family lives on; a reused token revokes its family.';

-- -----------------------------------------------------------------------------
-- relay.oauth_revoke(refresh digest, family, client) → whether a family ended (RFC 7009)
-- -----------------------------------------------------------------------------
-- By refresh token (its digest) or by an access token's family; only the client's own.
create or replace function relay.oauth_revoke(p_digest bytea, p_family uuid, p_client_id text)
returns boolean
language plpgsql
security definer
set search_path = ''
as $$
declare
  v_family uuid := p_family;
begin
  if p_client_id is null or (p_digest is null and p_family is null) then
    raise exception 'oauth_revoke needs a client and a refresh digest or a family' using errcode = '22004';
  end if;
  if p_digest is not null then
    select t.family_id into v_family from private.oauth_refresh_tokens t where t.digest = p_digest;
  end if;
  update private.oauth_families f set revoked_at = now()
  where f.id = v_family and f.revoked_at is null
    and exists (select from public.oauth_grants g where g.id = f.grant_id and g.client_id = p_client_id);
  return found;
end;
$$;
comment on function relay.oauth_revoke(bytea, uuid, text) is
  'Revokes the token family of a refresh token (by digest) or an access token (by family), if it is CLIENT''s.';

-- -----------------------------------------------------------------------------
-- relay.oauth_grants(user) and relay.oauth_disconnect(user, grant): Connected agents
-- -----------------------------------------------------------------------------
create or replace function relay.oauth_grants(p_user uuid)
returns jsonb
language plpgsql
stable
security definer
set search_path = ''
as $$
begin
  if p_user is null then
    raise exception 'oauth_grants needs a user' using errcode = '22004';
  end if;
  return coalesce((
    select jsonb_agg(jsonb_build_object('id', g.id, 'client_id', g.client_id, 'client_name', g.client_name,
                                        'client_host', g.client_host, 'created_at', g.created_at,
                                        'last_used_at', g.last_used_at) order by g.created_at)
    from public.oauth_grants g where g.user_id = p_user), '[]');
end;
$$;
comment on function relay.oauth_grants(uuid) is
  'The agents USER connected: id, client id, name, host, created and last used.';

create or replace function relay.oauth_disconnect(p_user uuid, p_grant uuid)
returns boolean
language plpgsql
security definer
set search_path = ''
as $$
begin
  if p_user is null or p_grant is null then
    raise exception 'oauth_disconnect needs a user and a grant' using errcode = '22004';
  end if;
  delete from public.oauth_grants g where g.id = p_grant and g.user_id = p_user;
  return found;
end;
$$;
comment on function relay.oauth_disconnect(uuid, uuid) is
  'Deletes one of USER''s grants: its tokens fail and its waiting requests end.';

-- -----------------------------------------------------------------------------
-- relay.sweep_oauth(stale days, limit) → rows removed
-- -----------------------------------------------------------------------------
-- Called with the reap: expired authorization requests and codes, ended families (and
-- their refresh tokens), used refresh tokens past a family's life, registered clients
-- unused for STALE days without a grant, and fetched documents no grant names after a day.
-- The account rows the relay's maintenance keeps bounded go here too: agent keys and
-- location shares revoked longer ago than private.revoked_kept_for() (30 days), and the
-- creations (private.creations) past the hour their rate counts.
create or replace function relay.sweep_oauth(p_stale_days int, p_limit int)
returns int
language plpgsql
security definer
set search_path = ''
as $$
declare
  v_total int := 0;
  v_count int;
begin
  if p_stale_days is null or p_stale_days not between 1 and 3650 or p_limit is null or p_limit not between 1 and 100000 then
    raise exception 'sweep_oauth needs 1 to 3650 days and a limit of 1 to 100000' using errcode = '22023';
  end if;
  delete from private.oauth_authorizations a
  where a.id in (select x.id from private.oauth_authorizations x where x.expires_at < now() - interval '1 hour'
                 limit p_limit);
  get diagnostics v_count = row_count;
  v_total := v_total + v_count;
  delete from private.oauth_families f
  where f.id in (select x.id from private.oauth_families x
                 where x.expires_at < now() or x.revoked_at < now() - interval '1 day' limit p_limit);
  get diagnostics v_count = row_count;
  v_total := v_total + v_count;
  delete from private.oauth_clients c
  where c.client_id in (
    select x.client_id from private.oauth_clients x
    where ((x.kind = 'registered' and x.last_used_at < now() - make_interval(days => p_stale_days))
           or (x.kind = 'document' and x.last_used_at < now() - interval '1 day'))
      and not exists (select from public.oauth_grants g where g.client_id = x.client_id)
    limit p_limit);
  get diagnostics v_count = row_count;
  v_total := v_total + v_count;
  delete from public.agent_keys k
  where k.id in (select x.id from public.agent_keys x where x.revoked_at < now() - private.revoked_kept_for()
                 limit p_limit);
  get diagnostics v_count = row_count;
  v_total := v_total + v_count;
  delete from public.location_shares s
  where s.id in (select x.id from public.location_shares x where x.revoked_at < now() - private.revoked_kept_for()
                 limit p_limit);
  get diagnostics v_count = row_count;
  v_total := v_total + v_count;
  delete from private.creations c
  where c.id in (select x.id from private.creations x where x.created_at < now() - interval '1 hour' limit p_limit);
  get diagnostics v_count = row_count;
  return v_total + v_count;
end;
$$;
comment on function relay.sweep_oauth(int, int) is
  'Deletes up to LIMIT each of expired authorizations, ended token families, unused clients, agent keys and location shares revoked over 30 days ago, and creations past their hour; returns how many.';

revoke execute on function relay.oauth_register_client(text, text, text[], text[], text, bytea, text),
  relay.oauth_remember_document(text, text, text[], text[], text), relay.oauth_client(text),
  relay.oauth_begin(uuid, text, text, text, text, text, text, text, text, int), relay.oauth_consent_request(uuid),
  relay.oauth_decide(uuid, uuid, boolean, bytea, int),
  relay.oauth_redeem_code(bytea, text, text, text, text, uuid, bytea, int), relay.oauth_refresh(bytea, text, bytea, int),
  relay.oauth_revoke(bytea, uuid, text), relay.oauth_grants(uuid), relay.oauth_disconnect(uuid, uuid),
  relay.sweep_oauth(int, int)
  from public, anon, authenticated, service_role;
grant execute on function relay.oauth_register_client(text, text, text[], text[], text, bytea, text),
  relay.oauth_remember_document(text, text, text[], text[], text), relay.oauth_client(text),
  relay.oauth_begin(uuid, text, text, text, text, text, text, text, text, int), relay.oauth_consent_request(uuid),
  relay.oauth_decide(uuid, uuid, boolean, bytea, int),
  relay.oauth_redeem_code(bytea, text, text, text, text, uuid, bytea, int), relay.oauth_refresh(bytea, text, bytea, int),
  relay.oauth_revoke(bytea, uuid, text), relay.oauth_grants(uuid), relay.oauth_disconnect(uuid, uuid),
  relay.sweep_oauth(int, int)
  to whereabot_relay;
