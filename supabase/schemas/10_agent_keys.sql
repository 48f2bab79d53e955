-- =============================================================================
-- Agent keys: the headless fallback credential
-- =============================================================================
-- A key is `wb_` followed by 64 hex digits (32 random bytes). Only its SHA-256 (hex) is
-- stored; the plaintext is returned once at creation and exists nowhere else. A user's own
-- session creates and revokes keys through the API (public.create_agent_key,
-- public.revoke_agent_key); the browser phone does it over its socket (relay.create_agent_key,
-- relay.revoke_agent_key in 29_relay_browser_phone.sql). Both share one implementation.
-- The relay looks keys up by hash through relay.agent_key_owner.

create table public.agent_keys (
  id uuid primary key default gen_random_uuid(),
  user_id uuid not null references auth.users (id) on delete cascade,
  name text not null check (char_length(name) between 1 and 100),
  key_hash text not null unique check (key_hash ~ '^[0-9a-f]{64}$'),
  key_prefix text not null check (key_prefix ~ '^wb_[0-9a-f]{8}$'),
  created_at timestamptz not null default now(),
  last_used_at timestamptz,
  revoked_at timestamptz
);
comment on table public.agent_keys is
  'Agent keys (wb_...) of each user, stored only as SHA-256 hashes. Created and revoked through create_agent_key and revoke_agent_key.';
comment on column public.agent_keys.key_prefix is 'The first 11 characters, to tell keys apart in a list.';

create index agent_keys_user_id_idx on public.agent_keys (user_id);
create index agent_keys_revoked_at_idx on public.agent_keys (revoked_at) where revoked_at is not null;
comment on index public.agent_keys_key_hash_key is 'relay.agent_key_owner: an agent key by its hash, on every request with a key.';
comment on index public.agent_keys_user_id_idx is 'The 25-keys-per-user limit trigger, and deleting a user (cascade).';
comment on index public.agent_keys_revoked_at_idx is 'relay.sweep_oauth: keys revoked longer ago than private.revoked_kept_for().';

alter table public.agent_keys enable row level security;

-- Reads only; every write goes through the functions below.
revoke all on public.agent_keys from anon, authenticated;
grant select on public.agent_keys to authenticated;

create policy "Users can read their own agent keys from their own session"
  on public.agent_keys for select to authenticated
  using (user_id = (select auth.uid()) and (select auth.jwt()) ->> 'client_id' is null);

create trigger agent_keys_revocation_is_final
  before update on public.agent_keys
  for each row execute function private.forbid_unrevoke();

-- One account's inserts wait for each other, so the cap holds under concurrency.
create trigger agent_keys_lock_user
  before insert on public.agent_keys
  for each row execute function private.lock_user_inserts();
create trigger agent_keys_per_user_limit
  before insert on public.agent_keys
  for each row execute function private.enforce_per_user_limit('user_id', '25');

-- -----------------------------------------------------------------------------
-- Creations per hour, revoked ones included (agent keys here, location shares in
-- 15_location_shares.sql)
-- -----------------------------------------------------------------------------
-- The caps count live rows only, and a revoked row stays: without a rate one socket made
-- thousands of revoked keys in seconds, each revocation a NOTIFY to every relay instance.
-- So every creation leaves a row in private.creations, whatever becomes of what it made
-- (revoked, or a share deleted), and an account's creations of a kind in the last hour are
-- capped (54000, as the caps are). Rows past the hour, and keys and shares revoked more
-- than private.revoked_kept_for() ago, are deleted by relay.sweep_oauth with the reap.
create table private.creations (
  id bigint generated always as identity primary key,
  user_id uuid not null references auth.users (id) on delete cascade,
  kind text not null check (kind in ('agent_key', 'location_share')),
  created_at timestamptz not null default now()
);
comment on table private.creations is
  'One row per agent key or location share created, by account and time, kept an hour: what the hourly creation rates count.';
create index creations_user_id_kind_created_at_idx on private.creations (user_id, kind, created_at);
create index creations_created_at_idx on private.creations (created_at);
comment on index private.creations_user_id_kind_created_at_idx is
  'private.enforce_creation_rate: an account''s creations of a kind in the last hour; deleting a user (cascade).';
comment on index private.creations_created_at_idx is 'relay.sweep_oauth: the rows past the hour.';
alter table private.creations enable row level security;
revoke all on private.creations from public, anon, authenticated, service_role;

create or replace function private.max_agent_keys_per_hour()
returns int language sql immutable set search_path = '' as $$ select 25 $$;
comment on function private.max_agent_keys_per_hour() is
  'Agent keys one account may create in any hour, revoked ones included (a whole cap''s worth at once).';
revoke execute on function private.max_agent_keys_per_hour() from public, anon, authenticated;

create or replace function private.revoked_kept_for()
returns interval language sql immutable set search_path = '' as $$ select interval '30 days' $$;
comment on function private.revoked_kept_for() is
  'How long a revoked agent key or location share is kept before relay.sweep_oauth deletes it.';
revoke execute on function private.revoked_kept_for() from public, anon, authenticated;

-- A BEFORE INSERT trigger: enforce_creation_rate('agent_key', 'user_id') records the
-- creation and refuses it (54000) once the account made the kind's hourly maximum. One
-- account's creations of a kind wait for each other (an advisory lock), so the rate holds
-- under concurrency. Named to fire after the table's cap, so a row the cap refuses never
-- counts.
create or replace function private.enforce_creation_rate()
returns trigger
language plpgsql
security definer
set search_path = ''
as $$
declare
  v_kind text := tg_argv[0];
  v_user uuid := (to_jsonb(new) ->> tg_argv[1])::uuid;
  v_limit int := case tg_argv[0] when 'agent_key' then private.max_agent_keys_per_hour()
                                 when 'location_share' then private.max_location_shares_per_hour() end;
begin
  if v_user is null or v_limit is null then
    raise exception 'enforce_creation_rate needs a known kind and a user column' using errcode = '22004';
  end if;
  perform pg_catalog.pg_advisory_xact_lock(
    pg_catalog.hashtextextended('whereabot_creations:' || v_kind || ':' || v_user::text, 0));
  if (select count(*) from private.creations c
      where c.user_id = v_user and c.kind = v_kind and c.created_at > now() - interval '1 hour') >= v_limit then
    raise exception '% allows at most % created per hour per user, revoked ones included; try again later',
      tg_table_name, v_limit using errcode = '54000';
  end if;
  insert into private.creations (user_id, kind) values (v_user, v_kind);
  return new;
end;
$$;
comment on function private.enforce_creation_rate() is
  'BEFORE INSERT trigger: records a creation and refuses it (54000) past the account''s hourly rate for its kind, revoked rows included. Args: kind, user column.';
revoke execute on function private.enforce_creation_rate() from public, anon, authenticated;

create trigger agent_keys_per_user_rate
  before insert on public.agent_keys
  for each row execute function private.enforce_creation_rate('agent_key', 'user_id');

-- -----------------------------------------------------------------------------
-- Agent keys carry a signature the relay checks without the database
-- -----------------------------------------------------------------------------
-- A key is 'wb_', 32 hex digits of randomness and 32 of HMAC-SHA256 over 'wb_' and those
-- digits under a secret only the database and the relay instances hold. A forged key fails
-- the check before any lookup, so a valid key is looked up even from an address whose
-- failure budget strangers have spent (issue 38, finding 7). Keys made before signing have
-- the same shape and go the old way: looked up unless their address is over its budget.
create table private.agent_key_signing (
  id int primary key default 1 check (id = 1),
  secret bytea not null check (octet_length(secret) = 32),
  created_at timestamptz not null default now()
);
comment on table private.agent_key_signing is
  'The secret agent keys are signed with (one row, made on first use); readable only through relay.agent_key_secret().';
alter table private.agent_key_signing enable row level security;
revoke all on private.agent_key_signing from public, anon, authenticated, service_role;

create or replace function private.agent_key_secret()
returns bytea
language plpgsql
security definer
set search_path = ''
as $$
declare
  v_secret bytea;
begin
  insert into private.agent_key_signing (id, secret) values (1, extensions.gen_random_bytes(32))
  on conflict (id) do nothing;
  select s.secret into v_secret from private.agent_key_signing s where s.id = 1;
  return v_secret;
end;
$$;
comment on function private.agent_key_secret() is
  'The agent-key signing secret, made on first use.';
revoke execute on function private.agent_key_secret() from public, anon, authenticated;

-- -----------------------------------------------------------------------------
-- private.create_agent_key_for(user, name) / private.revoke_agent_key_for(user, id)
-- -----------------------------------------------------------------------------
-- The one implementation; callers check who USER is (the API's functions take it from the
-- session's JWT, the relay's from the phone socket's credential).
create or replace function private.create_agent_key_for(p_user uuid, p_name text)
returns text
language plpgsql
security definer
set search_path = ''
as $$
declare
  v_key text;
  v_random text;
begin
  if p_user is null then
    raise exception 'creating an agent key needs a user' using errcode = '22004';
  end if;
  if p_name is null or char_length(btrim(p_name)) not between 1 and 100 then
    raise exception 'an agent key needs a name of 1 to 100 characters' using errcode = '22023';
  end if;
  -- Signed: 32 hex digits of randomness, then 32 of their HMAC under the signing secret.
  v_random := 'wb_' || encode(extensions.gen_random_bytes(16), 'hex');
  v_key := v_random || left(encode(extensions.hmac(convert_to(v_random, 'UTF8'), private.agent_key_secret(), 'sha256'), 'hex'), 32);
  insert into public.agent_keys (user_id, name, key_hash, key_prefix)
  values (p_user, private.clean_display_text(btrim(p_name), 100), encode(sha256(convert_to(v_key, 'UTF8')), 'hex'),
          left(v_key, 11));
  return v_key;
end;
$$;
comment on function private.create_agent_key_for(uuid, text) is
  'Creates an agent key for USER named NAME and returns its plaintext (only the hash is stored). Callers check who USER is.';
revoke execute on function private.create_agent_key_for(uuid, text) from public, anon, authenticated;

create or replace function private.revoke_agent_key_for(p_user uuid, p_id uuid)
returns boolean
language plpgsql
security definer
set search_path = ''
as $$
declare
  v_revoked_at timestamptz;
begin
  if p_user is null or p_id is null then
    raise exception 'revoking an agent key needs a user and a key id' using errcode = '22004';
  end if;
  select revoked_at into v_revoked_at from public.agent_keys where id = p_id and user_id = p_user for update;
  if not found then
    raise exception 'no agent key with that id belongs to you' using errcode = 'P0002';
  end if;
  if v_revoked_at is not null then
    return false;
  end if;
  update public.agent_keys set revoked_at = now() where id = p_id;  -- whereabot_key tells every instance
  return true;
end;
$$;
comment on function private.revoke_agent_key_for(uuid, uuid) is
  'Revokes USER''s agent key ID (true now, false when it already was). Callers check who USER is.';
revoke execute on function private.revoke_agent_key_for(uuid, uuid) from public, anon, authenticated;

-- -----------------------------------------------------------------------------
-- create_agent_key(name) → the plaintext key, once
-- -----------------------------------------------------------------------------
create or replace function private.create_agent_key(p_name text)
returns text
language plpgsql
security definer
set search_path = ''
as $$
begin
  if auth.uid() is null then
    raise exception 'creating an agent key needs a signed-in user' using errcode = '42501';
  end if;
  if (auth.jwt() ->> 'client_id') is not null then
    raise exception 'an agent credential cannot create agent keys' using errcode = '42501';
  end if;
  return private.create_agent_key_for(auth.uid(), p_name);
end;
$$;
comment on function private.create_agent_key(text) is
  'Creates an agent key for the calling user session and returns its plaintext; only the hash is stored.';
revoke execute on function private.create_agent_key(text) from public, anon;
grant execute on function private.create_agent_key(text) to authenticated;

create or replace function public.create_agent_key(name text)
returns text
language sql
security invoker
set search_path = ''
as $$ select private.create_agent_key(name) $$;
comment on function public.create_agent_key(text) is
  'Creates an agent key named NAME and returns it (wb_...) exactly once. Needs the user''s own session.';
revoke execute on function public.create_agent_key(text) from public, anon;
grant execute on function public.create_agent_key(text) to authenticated;

-- -----------------------------------------------------------------------------
-- revoke_agent_key(id) → true when revoked now, false when it already was
-- -----------------------------------------------------------------------------
create or replace function private.revoke_agent_key(p_id uuid)
returns boolean
language plpgsql
security definer
set search_path = ''
as $$
begin
  if auth.uid() is null or (auth.jwt() ->> 'client_id') is not null then
    raise exception 'revoking an agent key needs the user''s own session' using errcode = '42501';
  end if;
  if p_id is null then
    raise exception 'revoke_agent_key needs a key id' using errcode = '22004';
  end if;
  return private.revoke_agent_key_for(auth.uid(), p_id);
end;
$$;
comment on function private.revoke_agent_key(uuid) is
  'Revokes one of the calling user''s agent keys; every relay instance drops it via whereabot_key.';
revoke execute on function private.revoke_agent_key(uuid) from public, anon;
grant execute on function private.revoke_agent_key(uuid) to authenticated;

create or replace function public.revoke_agent_key(id uuid)
returns boolean
language sql
security invoker
set search_path = ''
as $$ select private.revoke_agent_key(id) $$;
comment on function public.revoke_agent_key(uuid) is
  'Revokes agent key ID; true when revoked now, false when it already was. Needs the user''s own session.';
revoke execute on function public.revoke_agent_key(uuid) from public, anon;
grant execute on function public.revoke_agent_key(uuid) to authenticated;

-- -----------------------------------------------------------------------------
-- whereabot_key: every relay instance drops a revoked or deleted key from its cache
-- -----------------------------------------------------------------------------
create or replace function private.notify_agent_key_revoked()
returns trigger
language plpgsql
security definer
set search_path = ''
as $$
begin
  perform private.notify('whereabot_key', jsonb_build_object('key_id', old.id));
  return null;
end;
$$;
comment on function private.notify_agent_key_revoked() is
  'AFTER trigger: NOTIFY whereabot_key {key_id} when a key is revoked or deleted.';
revoke execute on function private.notify_agent_key_revoked() from public, anon, authenticated;

create trigger agent_keys_notify_revoked
  after update of revoked_at on public.agent_keys
  for each row when (old.revoked_at is null and new.revoked_at is not null)
  execute function private.notify_agent_key_revoked();

-- A key deleted after its revocation (relay.sweep_oauth) was dropped then: no NOTIFY.
create trigger agent_keys_notify_deleted
  after delete on public.agent_keys
  for each row when (old.revoked_at is null)
  execute function private.notify_agent_key_revoked();
